//go:build !purego

#include "textflag.h"

// SPECIAL sets out to 0xff in each byte lane of x that is '"' (X1), '\\'
// (X2) or at most 0x1f (X3: min(x, 0x1f) == x), using t as scratch.
#define SPECIAL(x, t, out) \
	MOVO    x, out \
	PCMPEQB X1, out \
	MOVO    x, t \
	PCMPEQB X2, t \
	POR     t, out \
	MOVO    x, t \
	PMINUB  X3, t \
	PCMPEQB x, t \
	POR     t, out

// func indexSpecial(b []byte) int
//
// indexSpecial in SSE2, which every amd64 CPU has: 32, then 16 bytes at a
// time.
TEXT ·indexSpecial(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), BX
	MOVQ SI, DI
	MOVQ $0x2222222222222222, AX
	MOVQ AX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x5c5c5c5c5c5c5c5c, AX
	MOVQ AX, X2
	PUNPCKLQDQ X2, X2
	MOVQ $0x1f1f1f1f1f1f1f1f, AX
	MOVQ AX, X3
	PUNPCKLQDQ X3, X3

loop32:
	CMPQ BX, $32
	JB   loop16
	MOVOU (SI), X4
	MOVOU 16(SI), X8
	SPECIAL(X4, X6, X5)
	SPECIAL(X8, X10, X9)
	PMOVMSKB X5, AX
	PMOVMSKB X9, DX
	SHLQ  $16, DX
	ORQ   DX, AX
	TESTQ AX, AX
	JNZ   found
	ADDQ  $32, SI
	SUBQ  $32, BX
	JMP   loop32

loop16:
	CMPQ BX, $16
	JB   none
	MOVOU (SI), X4
	SPECIAL(X4, X6, X5)
	PMOVMSKB X5, AX
	TESTQ AX, AX
	JNZ   found
	ADDQ  $16, SI

none:
	SUBQ DI, SI
	MOVQ SI, ret+24(FP)
	RET

found:
	BSFQ AX, AX
	ADDQ AX, SI
	SUBQ DI, SI
	MOVQ SI, ret+24(FP)
	RET
