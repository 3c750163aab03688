package cluster

import "testing"

func TestIPPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern, host string
		port          int
		want          bool
	}{
		{"*", "1.2.3.4", 1, true},
		{"1.2.3.4", "1.2.3.4", 9, true},
		{"1.2.3.4:9", "1.2.3.4", 9, true},
		{"1.2.3.4:9", "1.2.3.4", 8, false},
		{"1.2.3.*", "1.2.3.200", 1, true},
		{"1.2.3-5.*", "1.2.4.1", 1, true},
		{"1.2.3-5.*", "1.2.6.1", 1, false},
		{"1.2.3.0/24", "1.2.3.9", 1, true},
		{"1.2.3.0/24", "1.2.4.9", 1, false},
		{"[::1]:20880", "::1", 20880, true},
		{"234e:0:4567:0:0:0:3d:*", "234e:0:4567::3d:ff", 1, true},
		{"my-host", "my-host", 1, true},
	} {
		p, err := ParseIPPattern(c.pattern)
		if err != nil {
			t.Errorf("%s: %v", c.pattern, err)
			continue
		}
		if got := p.Match(c.host, c.port); got != c.want {
			t.Errorf("%s ~ %s:%d = %v", c.pattern, c.host, c.port, got)
		}
	}
}
