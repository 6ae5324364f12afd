// wl_cxx: a C++ program with known heap calls of its own: ten `new int[8]`
// (32 bytes each) and their `delete[]`s.  libstdc++ adds its start-up
// emergency pool (malloc of 72,704 bytes on x86-64, never freed), made
// before the shim's constructor runs.
int main()
{
	for (int i = 0; i < 10; i++) {
		int *volatile p = new int[8];
		p[0] = i;
		delete[] p;
	}
	return 0;
}
