package proxy

import (
	"reflect"
	"testing"
)

func TestConvertRejectsLossyNumbers(t *testing.T) {
	cases := []struct {
		in   any
		to   reflect.Type
		fits bool
	}{
		{int64(1 << 40), reflect.TypeOf(int32(0)), false},
		{int64(7), reflect.TypeOf(int32(0)), true},
		{1.5, reflect.TypeOf(int64(0)), false},
		{2.0, reflect.TypeOf(int64(0)), true},
		{int64(-1), reflect.TypeOf(uint32(0)), false},
		{int32(3), reflect.TypeOf(float64(0)), true},
		{float64(1e300), reflect.TypeOf(float32(0)), false},
	}
	for _, c := range cases {
		_, err := convert(c.in, c.to)
		if (err == nil) != c.fits {
			t.Errorf("convert(%v %T -> %s) err = %v, want fits=%t", c.in, c.in, c.to, err, c.fits)
		}
	}
}
