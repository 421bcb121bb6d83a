//go:build amd64 && !purego

#include "textflag.h"

// Binary kernels: dst = a op b over DX bytes, with a, b, dst in SI, BX, DI.
// Each OP macro combines register a with register b into a, using t and u
// as temporaries.
//
// Every op is made commutative bit for bit, as the Go kernels are. A NaN
// result takes the payload of one operand, which depends on the order, so
// Sum and Prod OR in the result's unordered mask: any NaN lane becomes all
// ones. VMAXPS returns its second source when the inputs are equal or
// unordered, so max(a, b) and max(b, a) differ for (+0, -0) and for NaNs:
// AND-ing the two orders gives +0 for the zeros (OR gives -0 for Min), and
// OR-ing the inputs' unordered mask makes NaN lanes all ones.

#define SUMPS(a, b, t, u) VADDPS b, a, a; VCMPPS $3, a, a, t; VORPS t, a, a
#define PRODPS(a, b, t, u) VMULPS b, a, a; VCMPPS $3, a, a, t; VORPS t, a, a
#define MAXPS(a, b, t, u) VMAXPS b, a, t; VMAXPS a, b, u; VANDPS t, u, t; VCMPPS $3, b, a, u; VORPS u, t, a
#define MINPS(a, b, t, u) VMINPS b, a, t; VMINPS a, b, u; VORPS t, u, t; VCMPPS $3, b, a, u; VORPS u, t, a
#define SUMSS(a, b, t, u) VADDSS b, a, a; VCMPSS $3, a, a, t; VORPS t, a, a
#define PRODSS(a, b, t, u) VMULSS b, a, a; VCMPSS $3, a, a, t; VORPS t, a, a
#define MAXSS(a, b, t, u) VMAXSS b, a, t; VMAXSS a, b, u; VANDPS t, u, t; VCMPSS $3, b, a, u; VORPS u, t, a
#define MINSS(a, b, t, u) VMINSS b, a, t; VMINSS a, b, u; VORPS t, u, t; VCMPSS $3, b, a, u; VORPS u, t, a

#define SUMPD(a, b, t, u) VADDPD b, a, a; VCMPPD $3, a, a, t; VORPD t, a, a
#define PRODPD(a, b, t, u) VMULPD b, a, a; VCMPPD $3, a, a, t; VORPD t, a, a
#define MAXPD(a, b, t, u) VMAXPD b, a, t; VMAXPD a, b, u; VANDPD t, u, t; VCMPPD $3, b, a, u; VORPD u, t, a
#define MINPD(a, b, t, u) VMINPD b, a, t; VMINPD a, b, u; VORPD t, u, t; VCMPPD $3, b, a, u; VORPD u, t, a
#define SUMSD(a, b, t, u) VADDSD b, a, a; VCMPSD $3, a, a, t; VORPD t, a, a
#define PRODSD(a, b, t, u) VMULSD b, a, a; VCMPSD $3, a, a, t; VORPD t, a, a
#define MAXSD(a, b, t, u) VMAXSD b, a, t; VMAXSD a, b, u; VANDPD t, u, t; VCMPSD $3, b, a, u; VORPD u, t, a
#define MINSD(a, b, t, u) VMINSD b, a, t; VMINSD a, b, u; VORPD t, u, t; VCMPSD $3, b, a, u; VORPD u, t, a

// ARGS loads the three slices and turns the length into bytes.
#define ARGS(shift) \
	MOVQ dst_base+0(FP), DI; \
	MOVQ dst_len+8(FP), DX; \
	MOVQ a_base+24(FP), SI; \
	MOVQ b_base+48(FP), BX; \
	SHLQ $shift, DX

// BODY is the loop: four vectors at a time (the loads of one group are in
// flight while the previous group combines), then one, then scalars.
#define BODY(VOP, SOP, MOVS, esize) \
big: \
	CMPQ DX, $128; \
	JB   one; \
	VMOVUPS (SI), Y0; \
	VMOVUPS 32(SI), Y1; \
	VMOVUPS 64(SI), Y2; \
	VMOVUPS 96(SI), Y3; \
	VMOVUPS (BX), Y4; \
	VMOVUPS 32(BX), Y5; \
	VMOVUPS 64(BX), Y6; \
	VMOVUPS 96(BX), Y7; \
	VOP(Y0, Y4, Y8, Y12); \
	VOP(Y1, Y5, Y9, Y13); \
	VOP(Y2, Y6, Y10, Y14); \
	VOP(Y3, Y7, Y11, Y15); \
	VMOVUPS Y0, (DI); \
	VMOVUPS Y1, 32(DI); \
	VMOVUPS Y2, 64(DI); \
	VMOVUPS Y3, 96(DI); \
	ADDQ $128, SI; \
	ADDQ $128, BX; \
	ADDQ $128, DI; \
	SUBQ $128, DX; \
	JMP  big; \
one: \
	CMPQ DX, $32; \
	JB   tail; \
	VMOVUPS (SI), Y0; \
	VMOVUPS (BX), Y4; \
	VOP(Y0, Y4, Y8, Y12); \
	VMOVUPS Y0, (DI); \
	ADDQ $32, SI; \
	ADDQ $32, BX; \
	ADDQ $32, DI; \
	SUBQ $32, DX; \
	JMP  one; \
tail: \
	TESTQ DX, DX; \
	JZ    done; \
	MOVS (SI), X0; \
	MOVS (BX), X4; \
	SOP(X0, X4, X8, X12); \
	MOVS X0, (DI); \
	ADDQ $esize, SI; \
	ADDQ $esize, BX; \
	ADDQ $esize, DI; \
	SUBQ $esize, DX; \
	JMP  tail; \
done: \
	VZEROUPPER; \
	RET

// func sumF32AVX2(dst, a, b []float32)
TEXT ·sumF32AVX2(SB), NOSPLIT, $0-72
	ARGS(2)
	BODY(SUMPS, SUMSS, VMOVSS, 4)

// func prodF32AVX2(dst, a, b []float32)
TEXT ·prodF32AVX2(SB), NOSPLIT, $0-72
	ARGS(2)
	BODY(PRODPS, PRODSS, VMOVSS, 4)

// func minF32AVX2(dst, a, b []float32)
TEXT ·minF32AVX2(SB), NOSPLIT, $0-72
	ARGS(2)
	BODY(MINPS, MINSS, VMOVSS, 4)

// func maxF32AVX2(dst, a, b []float32)
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-72
	ARGS(2)
	BODY(MAXPS, MAXSS, VMOVSS, 4)

// func sumF64AVX2(dst, a, b []float64)
TEXT ·sumF64AVX2(SB), NOSPLIT, $0-72
	ARGS(3)
	BODY(SUMPD, SUMSD, VMOVSD, 8)

// func prodF64AVX2(dst, a, b []float64)
TEXT ·prodF64AVX2(SB), NOSPLIT, $0-72
	ARGS(3)
	BODY(PRODPD, PRODSD, VMOVSD, 8)

// func minF64AVX2(dst, a, b []float64)
TEXT ·minF64AVX2(SB), NOSPLIT, $0-72
	ARGS(3)
	BODY(MINPD, MINSD, VMOVSD, 8)

// func maxF64AVX2(dst, a, b []float64)
TEXT ·maxF64AVX2(SB), NOSPLIT, $0-72
	ARGS(3)
	BODY(MAXPD, MAXSD, VMOVSD, 8)

// DIVBODY divides DX bytes at DI in place by the broadcast divisor in Y15.
// Division is latency bound, so two independent vectors per iteration.
#define DIVBODY(VDIV, SDIV, MOVS, esize) \
big: \
	CMPQ DX, $64; \
	JB   tail; \
	VMOVUPS (DI), Y0; \
	VMOVUPS 32(DI), Y1; \
	VDIV Y15, Y0, Y0; \
	VDIV Y15, Y1, Y1; \
	VMOVUPS Y0, (DI); \
	VMOVUPS Y1, 32(DI); \
	ADDQ $64, DI; \
	SUBQ $64, DX; \
	JMP  big; \
tail: \
	TESTQ DX, DX; \
	JZ    done; \
	MOVS (DI), X0; \
	SDIV X15, X0, X0; \
	MOVS X0, (DI); \
	ADDQ $esize, DI; \
	SUBQ $esize, DX; \
	JMP  tail; \
done: \
	VZEROUPPER; \
	RET

// func divF32AVX2(x []float32, d float32)
TEXT ·divF32AVX2(SB), NOSPLIT, $0-28
	MOVQ x_base+0(FP), DI
	MOVQ x_len+8(FP), DX
	SHLQ $2, DX
	VBROADCASTSS d+24(FP), Y15
	DIVBODY(VDIVPS, VDIVSS, VMOVSS, 4)

// func divF64AVX2(x []float64, d float64)
TEXT ·divF64AVX2(SB), NOSPLIT, $0-32
	MOVQ x_base+0(FP), DI
	MOVQ x_len+8(FP), DX
	SHLQ $3, DX
	VBROADCASTSD d+24(FP), Y15
	DIVBODY(VDIVPD, VDIVSD, VMOVSD, 8)
