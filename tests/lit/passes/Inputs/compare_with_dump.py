"""For each flash.kernel of an MLIR file, run `flashgen dump --emit source --out
RUNTIME_DIR` with the kernel's spec and compare the file it writes byte for byte
with DIALECT_DIR/<uri>.cu. Prints "identical: <uri>" per kernel; exits non-zero
on the first difference."""
import re
import subprocess
import sys

KERNEL = re.compile(r"flash\.kernel @(\w+) (\w+) for (\w+) \{([^}]*)\}")
DUMP_DTYPE = {"f16": "fp16", "bf16": "bf16"}


def dump_args(pass_name, arch, body, out_dir):
    args = ["flashgen", "dump", "--emit", "source", "--out", out_dir, "--pass", pass_name, "--arch", arch]
    for entry in (e.strip() for e in body.split(",")):
        if "=" in entry:
            key, value = (s.strip() for s in entry.split("="))
            value = DUMP_DTYPE.get(value, value) if key == "dtype" else value
            args += ["--" + key.replace("_", "-"), value]
        elif entry in ("causal", "deterministic"):
            args.append("--" + entry)
        else:
            sys.exit(f"flag {entry!r} has no spec-only `flashgen dump` option; use a variant without it")
    return args


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main(mlir_path, dialect_dir, runtime_dir):
    count = 0
    for match in KERNEL.finditer(open(mlir_path).read()):
        uri, pass_name, arch, body = match.groups()
        args = dump_args(pass_name, arch, body, runtime_dir)
        dump = subprocess.run(args, capture_output=True, text=True)
        if dump.returncode != 0:
            sys.exit(f"{' '.join(args)} failed:\n{dump.stderr}")
        runtime, dialect = read(f"{runtime_dir}/{uri}.cu"), read(f"{dialect_dir}/{uri}.cu")
        if runtime != dialect:
            sys.exit(f"differs: {uri} ({len(runtime)} bytes from flashgen dump, {len(dialect)} from flashgen-opt)")
        print(f"identical: {uri}")
        count += 1
    print(f"{count} kernels identical")


if __name__ == "__main__":
    main(*sys.argv[1:])
