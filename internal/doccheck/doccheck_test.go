// Package doccheck checks that every Go block in README.md and docs/*.md
// compiles as shown.
//
// A ```go block is compiled in a package of its own. A block with a package
// clause is compiled as the file it is. Any other block is a fragment: the
// check adds the imports it uses (the standard library's and this module's
// packages, recognised by name, unless the block imports them itself) and
// wraps statements in a function, but it declares nothing else, so a
// fragment must declare every variable and helper it uses. The one leniency
// for fragments is "declared and not used", since a fragment often shows a
// value without using it. Declarations that a block needs but that would
// only clutter the page go in an HTML comment right above it:
//
//	<!-- doccheck
//	func charge(ctx context.Context, order string) error { return nil }
//	-->
//
// Compiler errors name the Markdown file and line. Blocks about the adapter
// modules (those that name bulkheadgrpc or bulkheadotel, and every block of
// docs/grpc.md) need dependencies this module does not have: .ci/adapters.sh
// compiles them inside their own modules.
package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// knownImports maps a package name used in fragments to its import path.
var knownImports = map[string]string{
	"bulkhead":     "github.com/bulkhead-go/bulkhead",
	"semaphore":    "github.com/bulkhead-go/bulkhead/semaphore",
	"pool":         "github.com/bulkhead-go/bulkhead/pool",
	"future":       "github.com/bulkhead-go/bulkhead/future",
	"registry":     "github.com/bulkhead-go/bulkhead/registry",
	"bulkheadtest": "github.com/bulkhead-go/bulkhead/bulkheadtest",
	"bulkheadhttp": "github.com/bulkhead-go/bulkhead/bulkheadhttp",
	"adaptive":     "github.com/bulkhead-go/bulkhead/adaptive",
	"prometheus":   "github.com/prometheus/client_golang/prometheus",
	"promhttp":     "github.com/prometheus/client_golang/prometheus/promhttp",
	"goleak":       "go.uber.org/goleak",
	"context":      "context",
	"errors":       "errors",
	"fmt":          "fmt",
	"http":         "net/http",
	"httptest":     "net/http/httptest",
	"io":           "io",
	"log":          "log",
	"slog":         "log/slog",
	"os":           "os",
	"runtime":      "runtime",
	"strings":      "strings",
	"sync":         "sync",
	"atomic":       "sync/atomic",
	"testing":      "testing",
	"time":         "time",
	"rand":         "math/rand/v2",
	"json":         "encoding/json",
	"bytes":        "bytes",
	"strconv":      "strconv",
	"signal":       "os/signal",
}

type block struct {
	file    string // relative to the module root
	line    int    // line of the first line of code
	code    string
	prelude string // declarations from a doccheck comment above the block
}

func TestDocGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the docs' Go blocks with the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var blocks []block
	for _, f := range files {
		bs, err := extract(root, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.file == filepath.Join("docs", "grpc.md") ||
				strings.Contains(b.code, "bulkheadgrpc.") || strings.Contains(b.code, "bulkheadotel.") {
				continue
			}
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		t.Fatal("found no Go blocks in README.md and docs/: the extraction is broken")
	}

	dir, err := os.MkdirTemp(filepath.Join(root, "internal", "doccheck"), "_gen")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	fragments := map[string]bool{} // package directory -> is a fragment
	args := []string{"build", "-gcflags=-e", "-o", os.DevNull}
	for i, b := range blocks {
		src, fragment, err := render(b)
		if err != nil {
			t.Errorf("%s:%d: %v", b.file, b.line, err)
			continue
		}
		pkg := filepath.Join(dir, fmt.Sprintf("b%03d", i))
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "block.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		fragments[pkg] = fragment
		args = append(args, "./"+filepath.Join(filepath.Base(dir), filepath.Base(pkg)))
	}
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = filepath.Join(root, "internal", "doccheck")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	if len(out) == 0 {
		t.Fatalf("go build failed without output: %v", err)
	}
	var bad []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	pkgFragment := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# ") { // "# github.com/.../_genNNN/b007"
			pkgFragment = fragments[filepath.Join(dir, filepath.Base(line))]
			continue
		}
		if pkgFragment && strings.Contains(line, "declared and not used") {
			continue
		}
		bad = append(bad, line)
	}
	if len(bad) > 0 {
		t.Errorf("Go blocks in the docs do not compile:\n%s", strings.Join(bad, "\n"))
	}
}

var (
	fenceOpen  = regexp.MustCompile("^```go\\s*$")
	fenceClose = regexp.MustCompile("^```\\s*$")
)

// extract returns the ```go blocks of the Markdown file path.
func extract(root, path string) ([]block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(root, path)
	lines := strings.Split(string(data), "\n")
	var out []block
	var prelude string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "<!-- doccheck" {
			var p []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "-->"; i++ {
				p = append(p, lines[i])
			}
			prelude = strings.Join(p, "\n")
			continue
		}
		if !fenceOpen.MatchString(l) {
			if strings.TrimSpace(l) != "" {
				prelude = ""
			}
			continue
		}
		start := i + 1
		var code []string
		for i++; i < len(lines) && !fenceClose.MatchString(lines[i]); i++ {
			code = append(code, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: unclosed ```go block", rel, start)
		}
		out = append(out, block{file: rel, line: start + 1, code: strings.Join(code, "\n"), prelude: prelude})
		prelude = ""
	}
	return out, nil
}

var leadingImport = regexp.MustCompile(`^(?s)\s*(import\s*(\([^)]*\)|"[^"]*")\s*)+`)

// render turns b into a Go file, and reports whether b is a fragment.
func render(b block) (src string, fragment bool, err error) {
	where := fmt.Sprintf("//line %s:%d\n", b.file, b.line)
	if f, err := parser.ParseFile(token.NewFileSet(), "", b.code, parser.PackageClauseOnly); err == nil && f.Name != nil {
		return where + b.code + "\n", false, nil
	}
	code := b.code
	imports := ""
	lineShift := 0
	if m := leadingImport.FindString(code); m != "" {
		imports = m
		lineShift = strings.Count(m, "\n")
		code = code[len(m):]
	}
	body := fmt.Sprintf("//line %s:%d\n%s\n", b.file, b.line+lineShift, code)
	// Declarations, or statements to wrap in a function?
	declSrc := "package doc\n" + imports + "\n" + b.prelude + "\n" + body
	fset := token.NewFileSet()
	f, perr := parser.ParseFile(fset, "", declSrc, 0)
	if perr != nil {
		declSrc = "package doc\n" + imports + "\n" + b.prelude + "\nfunc _() {\n" + body + "}\n"
		f, perr = parser.ParseFile(fset, "", declSrc, 0)
		if perr != nil {
			return "", true, fmt.Errorf("neither declarations nor statements: %v", perr)
		}
	}
	// Add the imports the fragment uses but does not declare.
	have := map[string]bool{}
	for _, im := range f.Imports {
		p := strings.Trim(im.Path.Value, `"`)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		if name == "v2" { // math/rand/v2
			name = "rand"
		}
		have[name] = true
	}
	declared := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if n.Obj != nil {
				declared[n.Name] = true
			}
		}
		return true
	})
	var need []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Obj == nil && !have[id.Name] && !declared[id.Name] {
				if p, ok := knownImports[id.Name]; ok && !slices.Contains(need, p) {
					need = append(need, p)
				}
			}
		}
		return true
	})
	slices.Sort(need)
	var add strings.Builder
	for _, p := range need {
		fmt.Fprintf(&add, "import %q\n", p)
	}
	return strings.Replace(declSrc, "package doc\n", "package doc\n"+add.String(), 1), true, nil
}
