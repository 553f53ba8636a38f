package gang

import "math"

// Float16 is an IEEE 754 binary16 value, held as its bits.
type Float16 uint16

// BFloat16 is a bfloat16 value (the upper half of a float32), held as its
// bits.
type BFloat16 uint16

// NewFloat16 rounds f to the nearest binary16 (ties to even); values too
// large become infinities, NaN stays NaN.
func NewFloat16(f float32) Float16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN: keep it quiet and non-zero
		return Float16(sign | 0x7e00)
	case exp >= 0x1f: // overflow or infinity
		return Float16(sign | 0x7c00)
	case exp <= 0: // subnormal or zero
		if exp < -10 {
			return Float16(sign)
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return Float16(sign | uint16(half))
	}
	half := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, up to infinity: correct
	}
	return Float16(sign | uint16(half))
}

// Float32 is h's exact value.
func (h Float16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) / (1 << 24) // subnormal: mant * 2^-24
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// NewBFloat16 rounds f to the nearest bfloat16 (ties to even).
func NewBFloat16(f float32) BFloat16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return BFloat16(b>>16 | 0x40) // quiet NaN
	}
	b += 0x7fff + (b >> 16 & 1)
	return BFloat16(b >> 16)
}

// Float32 is b's exact value.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }
