#!/bin/bash
# ptxas sweep: which PTX ISA version / target each ptxas accepts for tcgen05.alloc, setmaxnreg and 256-bit loads
T=$(realpath "${KERNELWIKI_TOOLCHAINS:-.kernelwiki/toolchains}")
cd "$(mktemp -d)"  # scratch modules
declare -A PTXAS=([12.8]=$T/12.8/nvidia/cuda_nvcc/bin/ptxas [12.9]=$T/12.9/nvidia/cuda_nvcc/bin/ptxas [13.0]=/usr/local/cuda/bin/ptxas [13.1]=$T/13.1/nvidia/cu13/bin/ptxas [13.2]=$T/13.2/nvidia/cu13/bin/ptxas [13.3]=$T/13.3/nvidia/cu13/bin/ptxas [13.4]=$T/13.4/nvidia/cu13/bin/ptxas [13.5]=$T/13.5/nvidia/cu13/bin/ptxas)
mod() { # version target body
cat <<P
.version $1
.target $2
.address_size 64
.visible .entry k()
{
$3
ret;
}
P
}
TC='.reg .b32 r; .shared .b32 dst; mov.b32 r, dst; tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [r], 32;'
SM='setmaxnreg.inc.sync.aligned.u32 232;'
V8='.reg .b64 p; .reg .f32 f<8>; mov.b64 p, 0; ld.global.v8.f32 {f0,f1,f2,f3,f4,f5,f6,f7}, [p];'
for rel in 12.8 12.9 13.0 13.1 13.2 13.3 13.4 13.5; do
  p=${PTXAS[$rel]}
  for tgt in sm_100a sm_100f sm_101a sm_103a sm_110a; do
    ok=""
    for v in 8.6 8.7 8.8 9.0 9.1 9.2 9.3 9.4 9.5; do mod $v $tgt "$TC" > m.ptx; if $p -arch=$tgt m.ptx -o /dev/null 2>/dev/null; then ok="$ok $v"; fi; done
    echo "tcgen05.alloc $rel $tgt:${ok:- none}"
  done
  ok=""; for v in 7.8 8.0 8.1; do mod $v sm_90a "$SM" > m.ptx; if $p -arch=sm_90a m.ptx -o /dev/null 2>/dev/null; then ok="$ok $v"; fi; done
  echo "setmaxnreg $rel sm_90a:${ok:- none}"
  ok=""; for v in 8.6 8.7 8.8 9.0; do mod $v sm_100a "$V8" > m.ptx; if $p -arch=sm_100a m.ptx -o /dev/null 2>/dev/null; then ok="$ok $v"; fi; done
  echo "ld.global.v8.f32 $rel sm_100a:${ok:- none}"
done
