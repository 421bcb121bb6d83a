//go:build amd64 && !purego

#include "textflag.h"

// Kernels for the 16-bit floats: eight elements at a time are widened to
// float32, combined with the OP macros of kernels_amd64.s (repeated here,
// as macros are per file), and rounded back to nearest even. They handle
// len(dst) rounded down to a multiple of 8; the Go wrappers do the rest.
//
// Float16 uses the F16C conversions. BFloat16 widens by a shift and
// narrows with the same integer rounding as f32ToBF16: add 0x7fff plus
// the lowest kept bit, keep the upper half; NaNs are kept quiet instead.

#define SUMPS(a, b, t, u) VADDPS b, a, a; VCMPPS $3, a, a, t; VORPS t, a, a
#define PRODPS(a, b, t, u) VMULPS b, a, a; VCMPPS $3, a, a, t; VORPS t, a, a
#define MAXPS(a, b, t, u) VMAXPS b, a, t; VMAXPS a, b, u; VANDPS t, u, t; VCMPPS $3, b, a, u; VORPS u, t, a
#define MINPS(a, b, t, u) VMINPS b, a, t; VMINPS a, b, u; VORPS t, u, t; VCMPPS $3, b, a, u; VORPS u, t, a

#define LOADH(m, y) VCVTPH2PS m, y
#define STOREH(y, m) VCVTPS2PH $0, y, m

#define LOADB(m, y) VPMOVZXWD m, y; VPSLLD $16, y, y
// STOREB narrows y (clobbered) using Y1-Y3 and the constants in Y13-Y15.
#define STOREB(y, m) \
	VPSRLD $16, y, Y1; \
	VPAND Y13, Y1, Y1; \
	VPADDD Y1, y, Y2; \
	VPADDD Y14, Y2, Y2; \
	VPSRLD $16, Y2, Y2; \
	VPSRLD $16, y, Y3; \
	VPOR Y15, Y3, Y3; \
	VCMPPS $3, y, y, Y1; \
	VPBLENDVB Y1, Y3, Y2, Y2; \
	VPACKUSDW Y2, Y2, Y2; \
	VPERMQ $0x08, Y2, Y2; \
	VMOVDQU X2, m

#define ARGS \
	MOVQ dst_base+0(FP), DI; \
	MOVQ dst_len+8(FP), DX; \
	MOVQ a_base+24(FP), SI; \
	MOVQ b_base+48(FP), BX; \
	SHRQ $3, DX

// BCONST loads the bfloat16 rounding constants.
#define BCONST \
	MOVL $1, AX; \
	VMOVD AX, X13; \
	VPBROADCASTD X13, Y13; \
	MOVL $0x7fff, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL $0x40, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15

// BODY16 runs DX groups of eight elements.
#define BODY16(OP, LOAD, STORE) \
loop: \
	TESTQ DX, DX; \
	JZ    done; \
	LOAD((SI), Y0); \
	LOAD((BX), Y4); \
	OP(Y0, Y4, Y8, Y12); \
	STORE(Y0, (DI)); \
	ADDQ $16, SI; \
	ADDQ $16, BX; \
	ADDQ $16, DI; \
	DECQ DX; \
	JMP  loop; \
done: \
	VZEROUPPER; \
	RET

// func sumF16F16C(dst, a, b []uint16)
TEXT ·sumF16F16C(SB), NOSPLIT, $0-72
	ARGS
	BODY16(SUMPS, LOADH, STOREH)

// func prodF16F16C(dst, a, b []uint16)
TEXT ·prodF16F16C(SB), NOSPLIT, $0-72
	ARGS
	BODY16(PRODPS, LOADH, STOREH)

// func minF16F16C(dst, a, b []uint16)
TEXT ·minF16F16C(SB), NOSPLIT, $0-72
	ARGS
	BODY16(MINPS, LOADH, STOREH)

// func maxF16F16C(dst, a, b []uint16)
TEXT ·maxF16F16C(SB), NOSPLIT, $0-72
	ARGS
	BODY16(MAXPS, LOADH, STOREH)

// func sumBF16AVX2(dst, a, b []uint16)
TEXT ·sumBF16AVX2(SB), NOSPLIT, $0-72
	ARGS
	BCONST
	BODY16(SUMPS, LOADB, STOREB)

// func prodBF16AVX2(dst, a, b []uint16)
TEXT ·prodBF16AVX2(SB), NOSPLIT, $0-72
	ARGS
	BCONST
	BODY16(PRODPS, LOADB, STOREB)

// func minBF16AVX2(dst, a, b []uint16)
TEXT ·minBF16AVX2(SB), NOSPLIT, $0-72
	ARGS
	BCONST
	BODY16(MINPS, LOADB, STOREB)

// func maxBF16AVX2(dst, a, b []uint16)
TEXT ·maxBF16AVX2(SB), NOSPLIT, $0-72
	ARGS
	BCONST
	BODY16(MAXPS, LOADB, STOREB)

// DIV16 divides DX groups of eight at DI in place by the float32 in Y11.
#define DIV16(LOAD, STORE) \
loop: \
	TESTQ DX, DX; \
	JZ    done; \
	LOAD((DI), Y0); \
	VDIVPS Y11, Y0, Y0; \
	STORE(Y0, (DI)); \
	ADDQ $16, DI; \
	DECQ DX; \
	JMP  loop; \
done: \
	VZEROUPPER; \
	RET

// func divF16F16C(x []uint16, d float32)
TEXT ·divF16F16C(SB), NOSPLIT, $0-28
	MOVQ x_base+0(FP), DI
	MOVQ x_len+8(FP), DX
	SHRQ $3, DX
	VBROADCASTSS d+24(FP), Y11
	DIV16(LOADH, STOREH)

// func divBF16AVX2(x []uint16, d float32)
TEXT ·divBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ x_base+0(FP), DI
	MOVQ x_len+8(FP), DX
	SHRQ $3, DX
	VBROADCASTSS d+24(FP), Y11
	BCONST
	DIV16(LOADB, STOREB)
