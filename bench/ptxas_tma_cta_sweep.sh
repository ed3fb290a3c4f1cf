#!/bin/bash
T=$(realpath "${KERNELWIKI_TOOLCHAINS:-.kernelwiki/toolchains}")
cd "$(mktemp -d)"  # scratch modules
for p in $T/12.8/nvidia/cuda_nvcc/bin/ptxas $T/12.9/nvidia/cuda_nvcc/bin/ptxas /usr/local/cuda/bin/ptxas $T/13.3/nvidia/cu13/bin/ptxas $T/13.4/nvidia/cu13/bin/ptxas $T/13.5/nvidia/cu13/bin/ptxas; do
 ok=""
 for v in 8.0 8.5 8.6 8.7; do
cat > t.ptx <<P
.version $v
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 map)
{
.reg .b32 r<3>; .reg .b64 rd<2>;
.shared .align 128 .b8 buf[1024]; .shared .align 8 .b64 bar;
ld.param.u64 rd1, [map]; mov.b32 r1, buf; mov.b32 r2, bar;
cp.async.bulk.tensor.1d.shared::cta.global.mbarrier::complete_tx::bytes [r1], [rd1, {r1}], [r2];
ret;
}
P
  $p -arch=sm_90a t.ptx -o /dev/null 2>/dev/null && ok="$ok $v"
 done
 echo "$($p --version | grep -o 'V[0-9][0-9.]*') .shared::cta dst:${ok:- none}"
done
