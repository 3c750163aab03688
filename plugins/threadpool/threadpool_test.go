package threadpool

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Each pool reads Dubbo's keys with Dubbo's defaults for it.
func TestPoolsReadDubbosKeysAndDefaults(t *testing.T) {
	for _, c := range []struct {
		name, url string
		want      extension.PoolSpec
	}{
		{Fixed, "dubbo://h:1/s", extension.PoolSpec{Threads: 200, Core: 200}},
		{Fixed, "dubbo://h:1/s?threads=8&queues=4", extension.PoolSpec{Threads: 8, Core: 8, Queues: 4}},
		{Cached, "dubbo://h:1/s", extension.PoolSpec{Threads: math.MaxInt32, Alive: time.Minute}},
		{Cached, "dubbo://h:1/s?corethreads=2&threads=50&alive=500", extension.PoolSpec{Threads: 50, Core: 2, Alive: 500 * time.Millisecond}},
		{Limited, "dubbo://h:1/s?corethreads=1", extension.PoolSpec{Threads: 200, Core: 1}},
		{Eager, "dubbo://h:1/s?corethreads=1&threads=10&queues=5", extension.PoolSpec{Threads: 10, Core: 1, Queues: 5, Alive: time.Minute, Eager: true}},
	} {
		tp, ok := New(c.name)
		if !ok {
			t.Fatalf("%s unknown", c.name)
		}
		got, err := tp.Pool(kernel.MustParseURL(c.url))
		if err != nil || got != c.want {
			t.Errorf("%s %s: %+v %v, want %+v", c.name, c.url, got, err, c.want)
		}
	}
	tp, _ := New(Cached)
	if _, err := tp.Pool(kernel.MustParseURL("dubbo://h:1/s?corethreads=9&threads=3")); err == nil || !strings.Contains(err.Error(), "corethreads 9") {
		t.Errorf("corethreads over threads: %v", err)
	}
	if _, ok := New("elastic"); ok {
		t.Error("an unknown name is a pool")
	}
}
