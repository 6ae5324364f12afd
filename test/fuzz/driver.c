/*
 * Replays fuzz inputs without libFuzzer: each argument is a file or a
 * directory of files, each file one input to LLVMFuzzerTestOneInput().
 * A crash or a sanitizer report fails the run.  Prints "replayed N".
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay(const char *path, unsigned *n)
{
	FILE *f = fopen(path, "rb");
	static uint8_t buf[1 << 20];
	size_t len;

	if (!f) {
		perror(path);
		return 1;
	}
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	(*n)++;
	return 0;
}

int main(int argc, char **argv)
{
	unsigned n = 0;
	int err = 0;

	for (int i = 1; i < argc; i++) {
		struct stat sb;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &sb) < 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(sb.st_mode)) {
			err |= replay(argv[i], &n);
			continue;
		}
		d = opendir(argv[i]);
		while (d && (e = readdir(d))) {
			char path[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			err |= replay(path, &n);
		}
		if (d)
			closedir(d);
	}
	printf("replayed %u\n", n);
	return err;
}
