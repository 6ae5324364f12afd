/*
 * The report's flame graphs (icicles: callers above callees), written as
 * SVG; see report.h.  Their stacks are the memory commands' own folded
 * lines ("pid P;MEMORY;outer;...;inner BYTES": `shimmer peak --format
 * folded` for memory at the peak, `shimmer leaks --format folded` for
 * memory never freed), merged into a tree whose boxes are as wide as their
 * bytes.  Boxes narrower than a pixel are left out (their bytes still
 * count in their callers'), so the graph's size is bounded by its width,
 * not by the number of stacks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "leaks.h"
#include "map.h"
#include "peak.h"
#include "present.h"
#include "report.h"

#define FLAME_WIDTH 1200.0
#define FLAME_ROW 17
#define FLAME_DEPTH 60

struct node {
	int64_t name; /* into names */
	int64_t parent;
	double value, x;
	int depth;
};

struct tree {
	struct node *v;
	size_t n, cap;
	struct strtab names;
	struct map index; /* (parent, name) -> node + 1 */
};

struct index_item {
	struct map_key key;
	size_t node;
};

static int64_t child(struct tree *t, int64_t parent, const char *name, int *err)
{
	struct map_key k = { parent, 0, 0 };
	struct index_item *it;
	int64_t nm;

	if ((*err = strtab_index(&t->names, name, &nm)))
		return -1;
	k.a = nm;
	if (!(it = map_get(&t->index, &k))) {
		*err = -ENOMEM;
		return -1;
	}
	if (it->node)
		return (int64_t)it->node - 1;
	if (array_grow(&t->v, &t->cap, t->n, sizeof(*t->v)) < 0) {
		*err = -ENOMEM;
		return -1;
	}
	t->v[t->n] = (struct node){ .name = nm, .parent = parent,
				    .depth = parent < 0 ? 0 : t->v[parent].depth + 1 };
	it->node = t->n + 1;
	return (int64_t)t->n++;
}

/* One folded line into the tree (a malformed one is skipped). */
static int add_line(struct tree *t, char *line)
{
	char *sp = strrchr(line, ' '), *f, *save = NULL;
	int64_t node = -1;
	double v;
	int err = 0;

	if (!sp)
		return 0;
	*sp = 0;
	v = strtod(sp + 1, NULL);
	if (v <= 0)
		return 0;
	for (f = strtok_r(line, ";", &save); f && !err; f = strtok_r(NULL, ";", &save)) {
		node = child(t, node, f, &err);
		if (!err)
			t->v[node].value += v;
	}
	return err;
}

static const struct tree *sort_tree;

static int cmp_node(const void *x, const void *y)
{
	const struct node *a = &sort_tree->v[*(const size_t *)x], *b = &sort_tree->v[*(const size_t *)y];

	if (a->parent != b->parent)
		return a->parent < b->parent ? -1 : 1;
	if (a->value != b->value)
		return a->value > b->value ? -1 : 1;
	return strcmp(sort_tree->names.v[a->name], sort_tree->names.v[b->name]);
}

/* x of every node: its parent's, plus its elder siblings' values (children
 * by value, largest first); roots side by side. */
static int layout(struct tree *t, double *total)
{
	size_t *order = malloc((t->n + 1) * sizeof(*order));
	double *next = calloc(t->n + 1, sizeof(*next)), roots = 0;

	if (!order || !next) {
		free(order);
		free(next);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->n; i++)
		order[i] = i;
	sort_tree = t;
	array_sort(order, t->n, sizeof(*order), cmp_node);
	sort_tree = NULL;
	/* parents were made before their children: by parent, x is known */
	for (size_t i = 0; i < t->n; i++) {
		struct node *nd = &t->v[order[i]];

		if (nd->parent < 0) {
			nd->x = roots;
			roots += nd->value;
		} else {
			nd->x = t->v[nd->parent].x + next[nd->parent];
			next[nd->parent] += nd->value;
		}
	}
	*total = roots;
	free(order);
	free(next);
	return 0;
}

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static void svg(struct report *r, const struct tree *t, double total, const char *id)
{
	double k = FLAME_WIDTH / total;
	int depth = 0;
	size_t boxes = 0;

	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].value * k >= 1 && t->v[i].depth > depth && t->v[i].depth < FLAME_DEPTH)
			depth = t->v[i].depth;
	fprintf(r->out, "<div class=\"flame\"><svg id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\""
		" width=\"%.0f\" height=\"%d\">", id, FLAME_WIDTH, (depth + 1) * FLAME_ROW);
	for (size_t i = 0; i < t->n; i++) {
		const struct node *nd = &t->v[i];
		const char *name = t->names.v[nd->name];
		double w = nd->value * k;
		unsigned h = hash(name);
		char b[FMT_UNIT_MAX];
		int chars;

		if (w < 1 || nd->depth >= FLAME_DEPTH)
			continue;
		boxes++;
		fputs("<g><title>", r->out);
		report_html(r->out, name);
		fprintf(r->out, " \xe2\x80\x94 %s (%.1f%%)</title><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\""
			" height=\"%d\" fill=\"hsl(%u,%u%%,%u%%)\"/>",
			fmt_bytes(b, sizeof(b), nd->value), 100 * nd->value / total, nd->x * k,
			nd->depth * FLAME_ROW, w, FLAME_ROW - 1, 10 + h % 40, 60 + (h >> 8) % 30,
			62 + (h >> 16) % 14);
		chars = (int)((w - 6) / 6.7);
		if (chars >= 3) {
			size_t len = strlen(name);
			char text[512];

			/* in columns (a wide character is two), cut between
			 * characters */
			if (fmt_text_width(name, len) > (size_t)chars) {
				snprintf(text, sizeof(text), "%.*s..",
					 (int)fmt_text_cut(name, (size_t)chars - 2), name);
			} else {
				snprintf(text, sizeof(text), "%s", name);
			}
			fprintf(r->out, "<text x=\"%.1f\" y=\"%d\">", nd->x * k + 3,
				nd->depth * FLAME_ROW + 12);
			report_html(r->out, text);
			fputs("</text>", r->out);
		}
		fputs("</g>", r->out);
	}
	fputs("</svg></div>", r->out);
	fprintf(r->out, "<p class=\"note\">%zu boxes of %zu frames drawn (those a pixel wide or"
		" more), %s in all; hover a box for its frame and bytes.</p>", boxes, t->n,
		fmt_bytes((char[FMT_UNIT_MAX]){ 0 }, FMT_UNIT_MAX, total));
}

int report_flame(struct report *r, enum report_flame_kind kind)
{
	static const char *const ids[] = { "flame-leaked-svg", "flame-peak-svg",
					   "flame-allocated-svg" };
	static const char *const none[] = { "Every block was freed: nothing leaked.",
					    "No memory was live at any peak.",
					    "No allocation was recorded." };
	struct tree t = { .index = { .item_size = sizeof(struct index_item) } };
	char *buf = NULL, *line, *save = NULL;
	size_t len = 0;
	double total = 0;
	FILE *mem;
	int err;

	if (model_schema_version(r->m) < 3) {
		fputs("<p class=\"note\">The store has no call stacks (schema before 3).</p>", r->out);
		return 0;
	}
	mem = open_memstream(&buf, &len);
	if (!mem)
		return -ENOMEM;
	if (kind == REPORT_FLAME_PEAK) {
		err = peak_write(r->m, mem, PRESENT_FOLDED);
	} else {
		struct leaks_opts o;

		leaks_opts_init(&o);
		o.fmt = PRESENT_FOLDED;
		o.all_allocations = kind == REPORT_FLAME_ALLOCATED;
		err = leaks_write(r->m, mem, &o);
	}
	if (fclose(mem) && !err)
		err = -EIO;
	for (line = buf && !err ? strtok_r(buf, "\n", &save) : NULL; line && !err;
	     line = strtok_r(NULL, "\n", &save))
		err = add_line(&t, line);
	if (!err)
		err = layout(&t, &total);
	if (!err && total > 0)
		svg(r, &t, total, ids[kind]);
	else if (!err)
		fprintf(r->out, "<p class=\"note\">%s</p>", none[kind]);
	free(buf);
	free(t.v);
	strtab_free(&t.names);
	map_free(&t.index);
	return err;
}
