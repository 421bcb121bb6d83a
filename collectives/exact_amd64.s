//go:build amd64 && !purego

#include "textflag.h"

// exactSum32AVX2 is exactSum32's fast path, four elements at a time in
// float64 lanes; see exactSum32 in rankfold.go for the arithmetic. It
// returns where it stopped: the end of the whole groups of four, or the
// first group with a lane the fast path cannot settle.

// TWOSUM adds x (Y2) to the sums s (Y0) and their errors to c (Y1),
// TwoSum (Knuth) both times, marks in Y14 the lanes where the second was
// inexact or not finite (Y15 is zero), and moves R10 to the next source.
#define TWOSUM \
	VADDPD Y2, Y0, Y3; \
	VSUBPD Y0, Y3, Y4; \
	VSUBPD Y4, Y3, Y5; \
	VSUBPD Y5, Y0, Y5; \
	VSUBPD Y4, Y2, Y6; \
	VADDPD Y6, Y5, Y5; \
	VMOVAPD Y3, Y0; \
	VADDPD Y5, Y1, Y6; \
	VSUBPD Y1, Y6, Y7; \
	VSUBPD Y7, Y6, Y8; \
	VSUBPD Y8, Y1, Y8; \
	VSUBPD Y7, Y5, Y9; \
	VADDPD Y9, Y8, Y8; \
	VCMPPD $4, Y15, Y8, Y8; \
	VORPD Y8, Y14, Y14; \
	VMOVAPD Y6, Y1; \
	ADDQ $24, R10

// EXACT_ARGS loads the arguments: dst in DI, the end of its groups of four
// in CX, srcs in R8 and R9, from in AX; and zero in Y15.
#define EXACT_ARGS \
	MOVQ dst_base+0(FP), DI; \
	MOVQ dst_len+8(FP), CX; \
	ANDQ $-4, CX; \
	MOVQ srcs_base+24(FP), R8; \
	MOVQ srcs_len+32(FP), R9; \
	MOVQ from+48(FP), AX; \
	VXORPD Y15, Y15, Y15

// EXACT_RANKS starts a group's sums: c (Y1) zero, R10 at srcs[1] and R11
// at the end of srcs, 24 bytes a slice.
#define EXACT_RANKS \
	VXORPD Y1, Y1, Y1; \
	MOVQ $24, R10; \
	MOVQ R9, R11; \
	IMULQ $24, R11

DATA exactOne<>+0(SB)/8, $1
GLOBL exactOne<>(SB), RODATA|NOPTR, $8
DATA exactAbs<>+0(SB)/8, $0x7fffffffffffffff
GLOBL exactAbs<>(SB), RODATA|NOPTR, $8
DATA exactMax32<>+0(SB)/8, $0x47efffffe0000000
GLOBL exactMax32<>(SB), RODATA|NOPTR, $8

// func exactSum32AVX2(dst []float32, srcs [][]float32, from int) int
TEXT ·exactSum32AVX2(SB), NOSPLIT, $0-64
	EXACT_ARGS
	VPBROADCASTQ exactOne<>(SB), Y13
	VBROADCASTSD exactAbs<>(SB), Y12
	VBROADCASTSD exactMax32<>(SB), Y11

group:
	CMPQ AX, CX
	JAE  done
	VXORPD Y14, Y14, Y14        // bad lanes
	MOVQ 0(R8), SI
	VCVTPS2PD (SI)(AX*4), Y0    // s
	EXACT_RANKS

rank:
	CMPQ R10, R11
	JAE  final
	MOVQ (R8)(R10*1), SI
	VCVTPS2PD (SI)(AX*4), Y2    // x
	TWOSUM
	JMP  rank

final:
	VADDPD Y1, Y0, Y3           // t = s + c
	VCMPPD $0, Y15, Y3, Y4      // t == 0
	VBLENDVPD Y4, Y0, Y3, Y3    // then t = s: a sum of -0s is -0
	VSUBPD Y0, Y3, Y4           // bp = t - s
	VSUBPD Y4, Y3, Y5           // t - bp
	VSUBPD Y5, Y0, Y5           // s - (t - bp)
	VSUBPD Y4, Y1, Y6           // c - bp
	VADDPD Y6, Y5, Y5           // e, the error of t
	VCMPPD $4, Y15, Y5, Y6      // e != 0
	VPAND Y13, Y6, Y6           // 1 there
	VPANDN Y6, Y3, Y6           // and t even: round to odd
	VPXOR Y5, Y3, Y7            // e's sign differs from t's:
	VPCMPGTQ Y7, Y15, Y7        // all ones there
	VPXOR Y7, Y6, Y6
	VPSUBQ Y7, Y6, Y6           // -1 there, +1 elsewhere, in magnitude towards e
	VPADDQ Y6, Y3, Y3
	VANDPD Y12, Y3, Y4          // |t|
	VCMPPD $6, Y11, Y4, Y4      // > MaxFloat32, or NaN
	VORPD Y4, Y14, Y14
	VPTEST Y14, Y14
	JNZ  done
	VCVTPD2PSY Y3, X3
	VMOVUPS X3, (DI)(AX*4)
	ADDQ $4, AX
	JMP  group

done:
	VZEROUPPER
	MOVQ AX, ret+56(FP)
	RET

DATA exactInf<>+0(SB)/8, $0x7ff0000000000000
GLOBL exactInf<>(SB), RODATA|NOPTR, $8

// exactSum64AVX2 is exactSum64's fast path, four elements at a time; it
// returns where it stopped as exactSum32AVX2 does.
//
// func exactSum64AVX2(dst []float64, srcs [][]float64, from int) int
TEXT ·exactSum64AVX2(SB), NOSPLIT, $0-64
	EXACT_ARGS
	VBROADCASTSD exactAbs<>(SB), Y12
	VBROADCASTSD exactInf<>(SB), Y11

group64:
	CMPQ AX, CX
	JAE  done64
	VXORPD Y14, Y14, Y14        // bad lanes
	MOVQ 0(R8), SI
	VMOVUPD (SI)(AX*8), Y0      // s
	EXACT_RANKS

rank64:
	CMPQ R10, R11
	JAE  final64
	MOVQ (R8)(R10*1), SI
	VMOVUPD (SI)(AX*8), Y2      // x
	TWOSUM
	JMP  rank64

final64:
	VADDPD Y1, Y0, Y3           // t = s + c, the correctly rounded sum
	VCMPPD $0, Y15, Y3, Y4      // t == 0
	VBLENDVPD Y4, Y0, Y3, Y3    // then t = s: a sum of -0s is -0
	VANDPD Y12, Y3, Y4          // |t|
	VCMPPD $5, Y11, Y4, Y4      // not below +Inf: infinite or NaN
	VORPD Y4, Y14, Y14
	VPTEST Y14, Y14
	JNZ  done64
	VMOVUPD Y3, (DI)(AX*8)
	ADDQ $4, AX
	JMP  group64

done64:
	VZEROUPPER
	MOVQ AX, ret+56(FP)
	RET
