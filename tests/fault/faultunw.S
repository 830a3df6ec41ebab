/* faultunw.S: the pair of libraries the unwinder-reload test loads one
 * after the other at one address (libfaultunw_a.so, then libfaultunw_b.so).
 * Their allocating function returns from cudaMalloc at the same offset, but
 * the frames differ: a's keeps rbp as its frame pointer (CFA = rbp + 16);
 * b's holds data in rbp (an unmapped address) and its CFA is rsp + 16. An
 * unwinder that steps b's frame by what it learnt of a's reads through
 * that data. Written in assembly so that both the offset and the frames
 * are exactly these.
 *
 * FAULTUNW_A selects a; FAULTUNW_FN names the function; FAULTUNW_SIZE is
 * what it allocates.
 */
	.text
	.globl FAULTUNW_FN
	.type FAULTUNW_FN, @function
	.p2align 4
FAULTUNW_FN:
	.cfi_startproc
	pushq %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
#ifdef FAULTUNW_A
	movq %rsp, %rbp
	.cfi_def_cfa_register %rbp
	.byte 0x0f, 0x1f, 0x40, 0x00	/* a 4-byte nop: both prologues take 8 bytes */
#else
	movq $0x7ead0000, %rbp		/* 7 bytes; nothing is mapped there */
#endif
	leaq slot(%rip), %rdi
	movl $FAULTUNW_SIZE, %esi
	call cudaMalloc@PLT
	popq %rbp
#ifdef FAULTUNW_A
	.cfi_def_cfa %rsp, 8
#else
	.cfi_def_cfa_offset 8
#endif
	ret
	.cfi_endproc
	.size FAULTUNW_FN, .-FAULTUNW_FN

	.local slot
	.comm slot, 8, 8
	.section .note.GNU-stack, "", @progbits
