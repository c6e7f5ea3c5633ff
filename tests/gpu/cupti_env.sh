# Sourced by the GPU scripts that run rtrace's CUPTI-loading commands (the GPU metrics sampler,
# `rtrace metrics`): finds libcupti.so.13 wherever the toolkit at $CUDA_HOME (default
# /usr/local/cuda-13.0) keeps it, as run.sh looks, and puts it on LD_LIBRARY_PATH and in
# RTRACE_CUPTI_LIBRARY (unless that is set). Sets C to the toolkit.
C=${CUDA_HOME:-/usr/local/cuda-13.0}
for d in "$C/targets/x86_64-linux/lib" "$C/extras/CUPTI/lib64" "$C/lib64"; do
    if [ -e "$d/libcupti.so.13" ]; then
        export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export RTRACE_CUPTI_LIBRARY=${RTRACE_CUPTI_LIBRARY:-$d/libcupti.so.13}
        break
    fi
done
