#!/usr/bin/env python3
"""Point a copy of a store's stacks at big local libraries.

usage: sym_store.py IN.db OUT.db

A store recorded on another machine names libraries this one lacks, so its
stacks symbolize to nothing and cost nothing.  This rewrites a copy: each
module gets a local ELF file (the same file where one with the same
basename and build-id exists, else a stand-in of similar size and symbol
count, chosen by role), that file's build-id, a fresh load bias, and its
stack pcs are folded into the file's executable segment.  The names that
come out are meaningless; the cost of loading and searching the files is
that of a PyTorch process.
"""
import glob, os, re, shutil, sqlite3, subprocess, sys

ROLES = [  # basename pattern of the recorded module -> local stand-ins, first present wins
    (r'^python3', ['/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0', '/usr/bin/python3.11']),
    (r'^libtorch_cpu', ['/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/libLLVM.so.*']),
    (r'^libtorch_cuda', ['/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/librustc_driver-*.so']),
    (r'^libtorch_python', ['/root/.rustup/toolchains/nightly-x86_64-unknown-linux-gnu/lib/libLLVM.so.*']),
    (r'^libcuda\.so', ['/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1']),
    (r'^libtriton', ['/usr/lib/llvm-14/lib/libclang-cpp.so.14']),
    (r'^libc10_cuda', ['/usr/local/cuda/lib64/libnccl.so.2']),
    (r'^libnvidia-ml', ['/usr/lib/jvm/temurin-25-jdk-amd64/lib/server/libjvm.so']),
]
LOCAL_DIRS = ['/usr/local/cuda/lib64', '/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu']


def build_id(path):
    out = subprocess.run(['readelf', '-n', path], capture_output=True, text=True).stdout
    m = re.search(r'Build ID: ([0-9a-f]+)', out)
    return m.group(1) if m else None


def segments(path):
    """(first vaddr, end vaddr, exec lo, exec hi) of the PT_LOAD segments."""
    out = subprocess.run(['readelf', '-lW', path], capture_output=True, text=True).stdout
    lo, hi, x = None, 0, None
    for line in out.splitlines():
        f = line.split()
        if not f or f[0] != 'LOAD':
            continue
        va, memsz = int(f[2], 16), int(f[5], 16)
        lo = va if lo is None else min(lo, va)
        hi = max(hi, va + memsz)
        if 'E' in f[6:-1] and x is None:
            x = (va, va + memsz)
    return lo, hi, x


def local_for(path):
    base = os.path.basename(path or '')
    for pat, cands in ROLES:
        if re.search(pat, base):
            for c in cands:
                hits = sorted(glob.glob(c))
                if hits:
                    return hits[0]
    for d in LOCAL_DIRS:
        p = os.path.join(d, base)
        if base and os.path.isfile(p):
            return os.path.realpath(p)
    return None


def main():
    src, dst = sys.argv[1:3]
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o600)
    db = sqlite3.connect(dst)
    info = {}
    mods = db.execute('SELECT m.id, m.proc_id, m.path_id, m.bias, m.lo, m.hi, s.text FROM modules m'
                      ' LEFT JOIN strings s ON s.proc_id = m.proc_id AND s.id = m.path_id'
                      ' ORDER BY m.proc_id, m.lo').fetchall()
    nextbias = {}
    remap = {}  # proc -> [(old lo, old hi, old bias, new bias, exec lo, exec size)]
    for mid, proc, path_id, bias, lo, hi, text in mods:
        local = local_for(text)
        if not local:
            continue
        if local not in info:
            info[local] = (build_id(local), segments(local))
        bid, (vlo, vhi, x) = info[local]
        if x is None:
            continue
        nb = nextbias.get(proc, 0x100000000000)
        nextbias[proc] = nb + ((vhi + 0xfffffff) & ~0xfffffff) + 0x10000000
        newid = db.execute('SELECT COALESCE(MAX(id), 0) + 1 FROM strings WHERE proc_id = ?',
                           (proc,)).fetchone()[0]
        db.execute('INSERT INTO strings (proc_id, id, text) VALUES (?, ?, ?)', (proc, newid, local))
        db.execute('UPDATE modules SET path_id = ?, bias = ?, lo = ?, hi = ?, build_id = ?'
                   ' WHERE id = ?', (newid, nb, nb + vlo, nb + vhi, bid, mid))
        remap.setdefault(proc, []).append((lo, hi, bias, nb, x[0], x[1] - x[0]))
    n = 0
    for proc, rs in remap.items():
        # Schema 10 on: frames are stack_nodes (key node_id); before, stack_frames.
        tree = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'stack_nodes'").fetchone()
        table, key = ('stack_nodes', 'node_id') if tree else ('stack_frames', 'stack_id, level')
        rows = db.execute(f'SELECT {key}, pc FROM {table} WHERE proc_id = ?', (proc,)).fetchall()
        upd = []
        for *k, pc in rows:
            for lo, hi, bias, nb, xlo, xsz in rs:
                if lo <= pc < hi:
                    # Keep a return address (pc - 1 looked up) inside the segment.
                    upd.append((nb + xlo + 1 + (pc - bias) % (xsz - 1), proc, *k))
                    break
        where = ' AND '.join(f'{c.strip()} = ?' for c in key.split(','))
        db.executemany(f'UPDATE {table} SET pc = ? WHERE proc_id = ? AND {where}', upd)
        n += len(upd)
    db.commit()
    print(f'{dst}: {len(info)} local files, {n} frames moved', file=sys.stderr)


main()
