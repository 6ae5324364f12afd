/*
 * Units and escaping; see fmt.h.  Units are binary for bytes (KiB = 1024)
 * and decimal for time, as users read them in nvidia-smi and perf.
 */
#include <string.h>

#include "fmt.h"
#include "utf8.h"

char *fmt_duration(char *buf, size_t len, double ns)
{
	double a = ns < 0 ? -ns : ns;

	if (a < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (a < 1e6)
		snprintf(buf, len, "%.2f us", ns / 1e3);
	else if (a < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.3f s", ns / 1e9);
	return buf;
}

char *fmt_bytes(char *buf, size_t len, double bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = bytes;
	int u = -1;

	if (bytes < 1024 && bytes > -1024) {
		snprintf(buf, len, "%.0f B", bytes);
		return buf;
	}
	while (u < 3 && (v >= 1024 || v <= -1024)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.2f %s", v, units[u]);
	return buf;
}

void fmt_csv(FILE *out, const char *s)
{
	if (!s)
		return;
	if (!s[strcspn(s, ",\"\r\n")]) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

void fmt_json(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *end;

	if (!s) {
		fputs("null", out);
		return;
	}
	end = p + strlen(s);
	fputc('"', out);
	while (*p) {
		/* Paths and argv are bytes, JSON is UTF-8: mark what is not. */
		size_t n = utf8_len(p, (size_t)(end - p));

		if (n == 0) {
			fputs("\\ufffd", out);
			p++;
		} else if (*p == '"' || *p == '\\') {
			fprintf(out, "\\%c", *p++);
		} else if (*p == '\n') {
			fputs("\\n", out);
			p++;
		} else if (*p == '\t') {
			fputs("\\t", out);
			p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(out, "\\u%04x", *p++);
		} else {
			fwrite(p, 1, n, out);
			p += n;
		}
	}
	fputc('"', out);
}
