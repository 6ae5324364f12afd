/*
 * /proc/PID/maps and ELF headers.  A file's mappings are grouped by (dev,
 * inode); its load bias comes from the mapping of the lowest file offset
 * and the PT_LOAD segment that offset begins, as ld.so maps a segment at
 * bias + (p_vaddr rounded down to a page) from p_offset rounded down.  The
 * build-id is the NT_GNU_BUILD_ID note of a PT_NOTE segment, as the shim
 * reads it from memory.
 *
 * Expected load: a process with a few hundred objects costs one read of
 * maps and one open, header read and close per object (the headers and
 * notes are at the start of the file: no symbol table is read).
 */
#include "procmaps.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mapping {
	uint64_t lo, hi, off, dev, ino;
	int exec;
	char *path;
};

static int elf_ready(void)
{
	static int ready;

	if (!ready && elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	ready = 1;
	return 0;
}

int procmaps_open_path(pid_t pid, const char *path, char *buf, size_t len)
{
	int n = snprintf(buf, len, "/proc/%d/root%s", (int)pid, path);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* One line of maps: "lo-hi perms off major:minor ino   path". */
static int parse_line(char *line, struct mapping *m)
{
	unsigned long long lo, hi, off, ino;
	unsigned maj, min;
	char perms[8];
	int pos = 0;
	char *path, *nl;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &lo, &hi, perms, &off, &maj, &min,
		   &ino, &pos) < 7 || !pos)
		return 0;
	path = line + pos;
	nl = strchr(path, '\n');
	if (nl)
		*nl = '\0';
	/* Only files: anonymous memory, [heap], [vdso] and the like have no
	 * path or one not starting with '/'; a replaced file says so. */
	if (path[0] != '/' || ino == 0)
		return 0;
	if (strlen(path) > 10 && !strcmp(path + strlen(path) - 10, " (deleted)"))
		return 0;
	*m = (struct mapping){ .lo = lo, .hi = hi, .off = off, .ino = ino,
			       .dev = (uint64_t)maj << 32 | min, .exec = perms[2] == 'x',
			       .path = path };
	return 1;
}

static void build_id(Elf *e, struct pm_object *o)
{
	size_t n;

	if (elf_getphdrnum(e, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		Elf_Data *d;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		if (!d)
			continue;
		while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((char *)d->d_buf + name_off, "GNU", 4))
				continue;
			o->build_id_len = (uint8_t)(nh.n_descsz < sizeof(o->build_id) ?
						    nh.n_descsz : sizeof(o->build_id));
			memcpy(o->build_id, (char *)d->d_buf + desc_off, o->build_id_len);
			return;
		}
	}
}

/* The bias of the object whose lowest mapping (start lo) maps file offset
 * off; -ENOENT when no PT_LOAD begins there. */
static int load_bias(Elf *e, uint64_t lo, uint64_t off, uint64_t *bias)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	size_t n;

	if (elf_getphdrnum(e, &n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if ((ph.p_offset & ~(page - 1)) == off) {
			*bias = lo - (ph.p_vaddr & ~(page - 1));
			return 0;
		}
	}
	return -ENOENT;
}

/* Fills o's bias and build-id from its file; -ENOEXEC when it is not ELF. */
static int read_elf(pid_t pid, struct pm_object *o, uint64_t first_lo, uint64_t first_off)
{
	char path[4096];
	Elf *e = NULL;
	int fd, err;

	err = procmaps_open_path(pid, o->path, path, sizeof(path));
	if (err)
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out;
	}
	err = load_bias(e, first_lo, first_off, &o->bias);
	if (err == -ENOENT) {
		/* Not mapped the way ld.so maps: take the offset as is. */
		o->bias = first_lo - first_off;
		err = 0;
	}
	if (!err)
		build_id(e, o);
out:
	if (e)
		elf_end(e);
	close(fd);
	return err;
}

static int cmp_lo(const void *a, const void *b)
{
	const struct pm_object *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void procmaps_free(struct pm_objects *objs)
{
	for (size_t i = 0; i < objs->n; i++)
		free(objs->v[i].path);
	free(objs->v);
	objs->v = NULL;
	objs->n = 0;
}

int procmaps_read(pid_t pid, struct pm_objects *out)
{
	struct mapping *maps = NULL;
	size_t nmaps = 0, cap = 0, linecap = 0;
	struct pm_objects objs = { 0 };
	char path[64], *line = NULL;
	FILE *f;
	int err = elf_ready();

	if (err)
		return err;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &linecap, f) > 0) {
		struct mapping m;

		if (!parse_line(line, &m))
			continue;
		if (nmaps == cap) {
			struct mapping *grown;

			cap = cap ? cap * 2 : 256;
			grown = realloc(maps, cap * sizeof(*maps));
			if (!grown) {
				err = -ENOMEM;
				goto out;
			}
			maps = grown;
		}
		m.path = strdup(m.path);
		if (!m.path) {
			err = -ENOMEM;
			goto out;
		}
		maps[nmaps++] = m;
	}
	if (ferror(f))
		err = -EIO;
	objs.v = calloc(nmaps ? nmaps : 1, sizeof(*objs.v));
	if (err || !objs.v) {
		err = err ? err : -ENOMEM;
		goto out;
	}
	/* Group by file: each file once, with the span of all its mappings
	 * and the start of its lowest-offset one. */
	for (size_t i = 0; i < nmaps; i++) {
		struct pm_object *o;
		uint64_t first_lo = maps[i].lo, first_off = maps[i].off;
		int exec = 0, dup = 0;

		for (size_t j = 0; j < i && !dup; j++)
			dup = maps[j].dev == maps[i].dev && maps[j].ino == maps[i].ino;
		if (dup)
			continue;
		o = &objs.v[objs.n];
		*o = (struct pm_object){ .lo = maps[i].lo, .hi = maps[i].hi,
					 .dev = maps[i].dev, .ino = maps[i].ino };
		for (size_t j = i; j < nmaps; j++) {
			if (maps[j].dev != maps[i].dev || maps[j].ino != maps[i].ino)
				continue;
			exec |= maps[j].exec;
			if (maps[j].lo < o->lo)
				o->lo = maps[j].lo;
			if (maps[j].hi > o->hi)
				o->hi = maps[j].hi;
			if (maps[j].off < first_off) {
				first_off = maps[j].off;
				first_lo = maps[j].lo;
			}
		}
		if (!exec)
			continue;
		o->path = strdup(maps[i].path);
		if (!o->path) {
			err = -ENOMEM;
			goto out;
		}
		/* Known from the last read (same file at the same place): its
		 * headers are read once. */
		for (size_t k = 0; k < out->n; k++) {
			const struct pm_object *p = &out->v[k];

			if (p->dev == o->dev && p->ino == o->ino && p->lo == o->lo) {
				o->bias = p->bias;
				o->build_id_len = p->build_id_len;
				memcpy(o->build_id, p->build_id, sizeof(o->build_id));
				exec = 2;
				break;
			}
		}
		/* A file that cannot be read as ELF is no object of ours. */
		if (exec != 2 && read_elf(pid, o, first_lo, first_off)) {
			free(o->path);
			continue;
		}
		objs.n++;
	}
	qsort(objs.v, objs.n, sizeof(*objs.v), cmp_lo);
out:
	for (size_t i = 0; i < nmaps; i++)
		free(maps[i].path);
	free(maps);
	free(line);
	fclose(f);
	if (err) {
		procmaps_free(&objs);
		return err;
	}
	procmaps_free(out);
	*out = objs;
	return 0;
}

const struct pm_object *procmaps_find(const struct pm_objects *objs, uint64_t addr)
{
	size_t lo = 0, hi = objs->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < objs->v[mid].lo)
			hi = mid;
		else if (addr >= objs->v[mid].hi)
			lo = mid + 1;
		else
			return &objs->v[mid];
	}
	return NULL;
}

/* The file offset of vaddr: the PT_LOAD holding it maps p_offset at p_vaddr. */
static uint64_t file_offset(Elf *e, uint64_t vaddr)
{
	size_t n;

	if (elf_getphdrnum(e, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

/* Looks the names up in one symbol section.  A name defined more than once
 * (symbol versions) keeps the default version's, marked by a versym
 * without the hidden bit (0x8000). */
static void scan_symbols(Elf *e, Elf_Scn *scn, const char *const *names, size_t n,
			 uint64_t *vaddr, int *hidden, int *ifunc)
{
	GElf_Shdr sh;
	Elf_Data *d, *vd = NULL;
	size_t count;

	if (!gelf_getshdr(scn, &sh) || !(d = elf_getdata(scn, NULL)) || !sh.sh_entsize)
		return;
	if (sh.sh_type == SHT_DYNSYM) {
		for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
			GElf_Shdr vsh;

			if (gelf_getshdr(s, &vsh) && vsh.sh_type == SHT_GNU_versym)
				vd = elf_getdata(s, NULL);
		}
	}
	count = sh.sh_size / sh.sh_entsize;
	for (size_t i = 1; i < count; i++) {
		GElf_Sym sym;
		GElf_Versym ver = 0;
		const char *name;
		int type, h;

		if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		name = elf_strptr(e, sh.sh_link, sym.st_name);
		if (!name)
			continue;
		if (vd)
			gelf_getversym(vd, (int)i, &ver);
		h = !!(ver & 0x8000);
		for (size_t k = 0; k < n; k++) {
			if (strcmp(name, names[k]))
				continue;
			if (vaddr[k] && (h || !hidden[k]))
				break;
			vaddr[k] = sym.st_value;
			hidden[k] = h;
			ifunc[k] = type == STT_GNU_IFUNC;
			break;
		}
	}
}

int procmaps_symbols(const char *path, const char *const *names, size_t n, uint64_t *off)
{
	uint64_t *vaddr = calloc(n ? n : 1, sizeof(*vaddr));
	int *hidden = calloc(n ? n : 1, sizeof(*hidden));
	int *ifunc = calloc(n ? n : 1, sizeof(*ifunc));
	Elf *e = NULL;
	int fd = -1, found = 0, err = elf_ready();

	if (!vaddr || !hidden || !ifunc)
		err = -ENOMEM;
	if (err)
		goto out;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out;
	}
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB))
			scan_symbols(e, scn, names, n, vaddr, hidden, ifunc);
	}
	for (size_t k = 0; k < n; k++) {
		off[k] = vaddr[k] && !ifunc[k] ? file_offset(e, vaddr[k]) : 0;
		found += off[k] != 0;
	}
out:
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	free(vaddr);
	free(hidden);
	free(ifunc);
	return err ? err : found;
}
