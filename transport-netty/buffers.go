package netty

import (
	"math/bits"
	"sync"
)

// Buffers for encoding frames, and for reading frames larger than a
// connection's read buffer, come from pools by size class: four classes
// per power of two (4, 5, 6 and 7 KiB, 8, 10, 12, 14 KiB, ...) from 4 KiB
// to 16 MiB, so that a buffer is at most a quarter larger than what it
// holds. A large message then costs no garbage of its size per call on
// either side (before, its encoding buffer grew step by step and was
// dropped past 64 KiB, and its read buffer was made and dropped per
// frame), and a class's buffers go only to frames of about their size.
// sync.Pool drops what stays unused across two collections: large
// buffers are not kept for good.
//
// Read buffers have pools of their own and exactly their class's
// capacity, which is what a server's budget for large frames is charged
// (bigBudget): the bound on what hostile peers can make it hold stays
// exact. Encode buffers are filed by the capacity they grew to.
const (
	minBufShift = 12 // 4 KiB, the smallest class
	maxBufShift = 24 // 16 MiB, the largest; larger buffers are made and dropped
	bufClasses  = (maxBufShift-minBufShift)*4 + 1
)

var encodeBufs, readBufs [bufClasses]sync.Pool

// classSize is the capacity of class i: (4 + i%4) << (10 + i/4) bytes.
func classSize(i int) int { return (4 + i%4) << (minBufShift - 2 + i/4) }

// classAtLeast is the smallest class that holds n bytes; bufClasses when
// none does.
func classAtLeast(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	e := bits.Len(uint(n-1)) - 3 // (n-1)>>e is 4..7
	i := (e-(minBufShift-2))*4 + int((n-1)>>e) + 1 - 4
	return min(i, bufClasses)
}

// classAtMost is the largest class not larger than c bytes; -1 when c is
// under the smallest, bufClasses-1 at most.
func classAtMost(c int) int {
	if c < 1<<minBufShift {
		return -1
	}
	e := bits.Len(uint(c)) - 3 // c>>e is 4..7
	return min((e-(minBufShift-2))*4+int(c>>e)-4, bufClasses-1)
}

// getEncodeBuf returns an empty buffer to encode a frame into, of the size
// class of hint (the connection's last frame) when that class's pool has
// one, else of the smallest class. It never makes a buffer for the hint:
// many senders at once after one large frame would otherwise each make
// one that large (memory that multiplies with the senders), where reusing
// pooled ones costs only what earlier large frames already made.
func getEncodeBuf(hint int) *[]byte {
	if i := classAtLeast(hint); i > 0 && i < bufClasses {
		if v := encodeBufs[i].Get(); v != nil {
			return v.(*[]byte)
		}
		// A buffer that grew to just past the hint (append's sizes are
		// not the classes') is filed one class down: take it if it holds
		// the hint.
		if v := encodeBufs[i-1].Get(); v != nil {
			if bp := v.(*[]byte); cap(*bp) >= hint {
				return bp
			}
			encodeBufs[i-1].Put(v)
		}
	}
	return Buffer(0)
}

// Buffer returns an empty buffer of capacity at least n from the encode
// pools, made when its class has none: for a protocol that builds frames
// of a size it knows (a stream's message, an answer) and hands them to
// Send as they are. Give it back with ReleaseBuffer once Send returns: the
// transport has written or copied the bytes by then.
func Buffer(n int) *[]byte {
	i := classAtLeast(n)
	if i >= bufClasses {
		b := make([]byte, 0, n)
		return &b
	}
	if v := encodeBufs[i].Get(); v != nil {
		return v.(*[]byte)
	}
	b := make([]byte, 0, classSize(i))
	return &b
}

// ReleaseBuffer gives back a buffer from Buffer (as it grew, if it did).
func ReleaseBuffer(bp *[]byte) { putEncodeBuf(bp) }

// putEncodeBuf gives an encode buffer back to the class its capacity
// fills: one that grew while it was used goes to its new class.
func putEncodeBuf(bp *[]byte) {
	i := classAtMost(cap(*bp))
	if i < 0 || cap(*bp) > classSize(bufClasses-1) {
		return
	}
	*bp = (*bp)[:0]
	encodeBufs[i].Put(bp)
}

// readBufCap is the capacity of the read buffer getReadBuf returns for a
// frame of n bytes.
func readBufCap(n int) int {
	if i := classAtLeast(n); i < bufClasses {
		return classSize(i)
	}
	return n
}

// getReadBuf returns a buffer of length n and capacity readBufCap(n).
func getReadBuf(n int) *[]byte {
	i := classAtLeast(n)
	if i >= bufClasses {
		b := make([]byte, n)
		return &b
	}
	if v := readBufs[i].Get(); v != nil {
		bp := v.(*[]byte)
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, classSize(i))
	return &b
}

// putReadBuf gives back a buffer from getReadBuf.
func putReadBuf(bp *[]byte) {
	if i := classAtMost(cap(*bp)); i >= 0 && cap(*bp) == classSize(i) {
		readBufs[i].Put(bp)
	}
}
