package netty

import (
	"math/bits"
	"sync"
)

// Buffers for encoding frames, and for reading frames larger than a
// connection's read buffer, come from pools by size class: powers of two
// from 4 KiB to 16 MiB. A large message then costs no garbage of its size
// per call on either side (before, its encoding buffer grew by doubling
// and was dropped past 64 KiB, and its read buffer was made and dropped
// per frame), and a class's buffers are handed only to frames of about
// their size, so a burst of large messages does not leave small ones
// holding large buffers. sync.Pool drops what stays unused across two
// collections: large buffers are not kept for good.
const (
	minBufShift = 12 // 4 KiB
	maxBufShift = 24 // 16 MiB; larger buffers are made and dropped
)

var bufClasses [maxBufShift - minBufShift + 1]sync.Pool

// getBuf returns an empty buffer whose capacity is at least n.
func getBuf(n int) *[]byte {
	k := minBufShift
	if n > 1<<minBufShift {
		k = bits.Len(uint(n - 1)) // the smallest power of two >= n
	}
	if k > maxBufShift {
		b := make([]byte, 0, n)
		return &b
	}
	if v := bufClasses[k-minBufShift].Get(); v != nil {
		return v.(*[]byte)
	}
	b := make([]byte, 0, 1<<k)
	return &b
}

// getEncodeBuf returns an empty buffer to encode a frame into, of the size
// class of hint (the connection's last frame) when that class's pool has
// one, else of the smallest class. It never makes a buffer for the hint:
// many senders at once after one large frame would otherwise each make
// one that large (memory that multiplies with the senders), where reusing
// pooled ones costs only what earlier large frames already made.
func getEncodeBuf(hint int) *[]byte {
	if hint > 1<<minBufShift {
		if k := bits.Len(uint(hint - 1)); k <= maxBufShift {
			if v := bufClasses[k-minBufShift].Get(); v != nil {
				return v.(*[]byte)
			}
		}
	}
	return getBuf(0)
}

// putBuf gives a buffer back to the class its capacity fills: a buffer
// that grew while it was used (append) goes to its new class.
func putBuf(bp *[]byte) {
	c := cap(*bp)
	if c < 1<<minBufShift {
		return
	}
	k := bits.Len(uint(c)) - 1 // the largest power of two <= c
	if k > maxBufShift {
		return
	}
	*bp = (*bp)[:0]
	bufClasses[k-minBufShift].Put(bp)
}
