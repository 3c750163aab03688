package wasmfilter

// FastPath reports whether the current version of f takes the fast call path
// (wazero's per-call watch off), and why not.
func FastPath(f *Filter) (bool, string) {
	v := f.cur.Load()
	return v.fast, v.slow
}

// ForceWatch makes the filters created from now on keep wazero's per-call
// watch (the fallback), until the returned function is called. Not for
// parallel tests.
func ForceWatch() (restore func()) {
	forceWatch = true
	return func() { forceWatch = false }
}

// FastPathError is the self-test's verdict on the wazero in use.
func FastPathError() error { return fastPathError() }
