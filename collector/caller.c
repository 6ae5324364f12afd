/*
 * One frame of DWARF unwinding (see caller.h): the CFA rule of ip's
 * function, evaluated on the copied stack words.  Only the rules compilers
 * emit for x86-64 code are understood: CFA = rsp + k, and rbp saved at
 * CFA + n or left alone; anything else (a CFA computed from rbp, an
 * expression) is "unknown", and the stack keeps what the kernel walked.
 *
 * Objects are looked up by path in a small list (a process has a few
 * hundred); each keeps its file open while it lives, for libdw.
 */
#include "caller.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REG_RBP 6
#define REG_RSP 7

struct cfi_file {
	char *path;
	int fd;       /* -1: could not be opened (not tried again) */
	Elf *elf;
	Dwarf_CFI *cfi;
};

struct caller {
	pid_t pid;
	struct cfi_file *files;
	size_t n, cap;
};

struct caller *caller_new(pid_t pid)
{
	struct caller *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		free(c);
		errno = ENOSYS;
		return NULL;
	}
	c->pid = pid;
	return c;
}

void caller_free(struct caller *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		if (c->files[i].cfi)
			dwarf_cfi_end(c->files[i].cfi);
		if (c->files[i].elf)
			elf_end(c->files[i].elf);
		if (c->files[i].fd >= 0)
			close(c->files[i].fd);
		free(c->files[i].path);
	}
	free(c->files);
	free(c);
}

static struct cfi_file *file_of(struct caller *c, const char *path)
{
	struct cfi_file *f;
	char open_path[4096];

	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->files[i].path, path))
			return &c->files[i];
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct cfi_file *grown = realloc(c->files, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		c->files = grown;
		c->cap = cap;
	}
	f = &c->files[c->n];
	*f = (struct cfi_file){ .path = strdup(path), .fd = -1 };
	if (!f->path)
		return NULL;
	c->n++;
	if (procmaps_open_path(c->pid, path, open_path, sizeof(open_path)) == 0)
		f->fd = open(open_path, O_RDONLY | O_CLOEXEC);
	if (f->fd >= 0)
		f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	if (f->elf)
		f->cfi = dwarf_getcfi_elf(f->elf);
	return f;
}

/* CFA + offset, for a register rule "saved at CFA + n": *n. */
static int saved_at(const Dwarf_Op *ops, size_t nops, int64_t *n)
{
	if (nops < 1 || ops[0].atom != DW_OP_call_frame_cfa)
		return 0;
	if (nops == 1) {
		*n = 0;
		return 1;
	}
	if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*n = (int64_t)ops[1].number;
		return 1;
	}
	if (nops == 3 && ops[1].atom == DW_OP_consts && ops[2].atom == DW_OP_plus) {
		*n = (int64_t)ops[1].number;
		return 1;
	}
	return 0;
}

int caller_of(struct caller *c, const struct pm_objects *objs, uint64_t ip, uint64_t sp,
	      uint64_t bp, const uint64_t *words, size_t n, struct caller_frame *out)
{
	const struct pm_object *o = procmaps_find(objs, ip);
	struct cfi_file *f;
	Dwarf_Frame *frame = NULL;
	Dwarf_Op *ops, mem[3];
	size_t nops;
	int64_t k, rbp_at;
	uint64_t cfa;
	int err = -ENOENT;

	if (!o)
		return -ENOENT;
	f = file_of(c, o->path);
	if (!f)
		return -ENOMEM;
	if (!f->cfi || dwarf_cfi_addrframe(f->cfi, ip - o->bias, &frame) != 0)
		return -ENOENT;
	if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1 ||
	    ops[0].atom != DW_OP_bregx || ops[0].number != REG_RSP)
		goto out;
	k = (int64_t)ops[0].number2;
	if (k < 8 || k % 8 || (uint64_t)k - 8 >= n * 8)
		goto out;
	cfa = sp + (uint64_t)k;
	out->ret = words[(k - 8) / 8];
	/* rbp: left alone, or saved in this frame and then either the base
	 * of this frame (a frame-pointer function: the walk from bp is right)
	 * or still holding the caller's value. */
	out->bp_unchanged = 0;
	if (dwarf_frame_register(frame, REG_RBP, mem, &ops, &nops) == 0) {
		if (nops == 0 && !ops)
			out->bp_unchanged = 1;
		else if (saved_at(ops, nops, &rbp_at) && rbp_at < 0 && k + rbp_at >= 0 &&
			 (uint64_t)(k + rbp_at) < n * 8)
			out->bp_unchanged = bp == cfa + (uint64_t)rbp_at ||
					    bp == words[(k + rbp_at) / 8];
	}
	err = 0;
out:
	free(frame);
	return err;
}
