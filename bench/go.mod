module github.com/bulkhead-go/bulkhead/bench

go 1.26.0

require (
	github.com/alitto/pond/v2 v2.7.1
	github.com/bulkhead-go/bulkhead v0.0.0-00010101000000-000000000000
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/panjf2000/ants/v2 v2.12.1
	golang.org/x/sync v0.25.0
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect

replace github.com/bulkhead-go/bulkhead => ../
