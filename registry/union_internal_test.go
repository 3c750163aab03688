package registry

import (
	"testing"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// lists records what a union hands its directory.
type lists struct{ got [][]*kernel.URL }

func (l *lists) Notify(urls []*kernel.URL) { l.got = append(l.got, urls) }

func (l *lists) last() []*kernel.URL { return l.got[len(l.got)-1] }

func strs(urls []*kernel.URL) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = u.String()
	}
	return out
}

func greeter(port int, params map[string]string) *kernel.URL {
	p := map[string]string{kernel.KeySide: kernel.SideProvider, kernel.KeyInterface: "org.example.Greeter"}
	for k, v := range params {
		p[k] = v
	}
	return kernel.NewURL("dubbo", "127.0.0.1", port, "org.example.Greeter", p)
}

// One registration seen through both levels keeps the URL the directory got
// first, whichever level answers first, so that the directory neither drops
// nor refers it again; a registration that really changes (a restart's new
// timestamp, another weight) or leaves is passed on.
func TestUnionKeepsOneURLPerRegistration(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, then int // member indexes: 0 interface level, 1 application level
	}{
		{"interface level first", 0, 1},
		{"application level first", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := &lists{}
			u := &union{dir: dir, parts: map[string][]*kernel.URL{}, preferInstances: true,
				members: []unionMember{{id: "r"}, {id: "r", instance: true}}}
			// The interface level lists the registered URL; the instances'
			// metadata, the same without its volatile parameters.
			registered := greeter(20880, map[string]string{kernel.KeyTimestamp: "1000", extension.KeyCategory: "providers"})
			described := greeter(20880, nil)
			other := greeter(20881, map[string]string{kernel.KeyTimestamp: "1001"})
			byLevel := [][]*kernel.URL{{registered, other}, {described, greeter(20881, nil)}}
			u.member(tc.first).Notify(byLevel[tc.first])
			want := strs(dir.last())
			u.member(tc.then).Notify(byLevel[tc.then])
			if got := strs(dir.last()); !equalStrings(got, want) {
				t.Fatalf("the second level's list of the same registrations changed the directory's: %v, then %v", want, got)
			}

			// A hiccup: both levels list nothing for a moment (the
			// directory keeps its providers through that), then the
			// application level lists them again first.
			u.member(0).Notify(nil)
			u.member(1).Notify(nil)
			u.member(1).Notify(byLevel[1])
			if got := strs(dir.last()); !equalStrings(got, want) {
				t.Fatalf("after an empty list, the same registrations came back as %v, want the URLs the directory holds, %v", got, want)
			}
			u.member(0).Notify(byLevel[0])

			// A restart registers anew: the interface level's new
			// timestamp, the application level's new revision (a changed
			// parameter here).
			restarted := greeter(20880, map[string]string{kernel.KeyTimestamp: "2000", "weight": "50"})
			u.member(0).Notify([]*kernel.URL{restarted, other})
			u.member(1).Notify([]*kernel.URL{greeter(20880, map[string]string{"weight": "50"}), greeter(20881, nil)})
			got := dir.last()
			if len(got) != 2 || got[0].String() == want[0] || got[0].Param("weight") != "50" {
				t.Fatalf("a provider registered anew with another weight: the directory got %v", got)
			}

			// Both levels drop the first provider: the directory does too.
			u.member(0).Notify([]*kernel.URL{other})
			u.member(1).Notify([]*kernel.URL{greeter(20881, nil)})
			if got := dir.last(); len(got) != 1 || got[0].Port != 20881 {
				t.Fatalf("after the first provider left both levels, the directory got %v", got)
			}
		})
	}
}

// At the interface level only (FORCE_INTERFACE), a restart's new timestamp
// is a new registration, as before: the directory gets the new URL.
func TestUnionPassesANewRegistration(t *testing.T) {
	dir := &lists{}
	u := &union{dir: dir, parts: map[string][]*kernel.URL{}, members: []unionMember{{id: "r"}}}
	u.member(0).Notify([]*kernel.URL{greeter(20880, map[string]string{kernel.KeyTimestamp: "1000"})})
	restarted := greeter(20880, map[string]string{kernel.KeyTimestamp: "2000"})
	u.member(0).Notify([]*kernel.URL{restarted})
	if got := dir.last(); len(got) != 1 || got[0].String() != restarted.String() {
		t.Fatalf("the directory got %v, want the new registration %v", got, restarted)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
