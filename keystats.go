package bulkhead

// KeyStats counts a keyed bulkhead's keys and its rejections by reason. It
// holds counts only, never a key (keys are often user ids). Its JSON names
// are the registry status page's "keys" (docs/metrics.md).
type KeyStats struct {
	// ActiveKeys is the number of keys that hold or wait for capacity now.
	ActiveKeys int `json:"active"`
	// IdleKeys is the number of entries of keys with nothing holding or
	// waiting, kept for reuse (a bounded cache, least recently used out).
	IdleKeys int `json:"idle"`
	// Evicted counts the entries of idle keys removed from that cache.
	Evicted uint64 `json:"evicted"`
	// RejectedKey, RejectedTotal and RejectedKeys count the rejections by
	// reason ([ReasonKey], [ReasonTotal], [ReasonKeys]); they add up to
	// Stats().Rejected.
	RejectedKey   uint64 `json:"rejectedKey"`
	RejectedTotal uint64 `json:"rejectedTotal"`
	RejectedKeys  uint64 `json:"rejectedKeys"`
}

// KeyedInstance is what keyed bulkheads have in common: an [Instance] whose
// limits apply per key, which also counts its keys.
type KeyedInstance interface {
	Instance
	KeyStats() KeyStats
}
