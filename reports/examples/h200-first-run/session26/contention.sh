#!/usr/bin/env bash
# One search (cupy/10_pipelined fp32) idle, beside 16 processes that spin, and beside 16 that spin at nice 10.
export PYTHONPATH=$PWD CUDA_PATH=/usr/local/cuda
spin() { for i in $(seq 16); do nice -n "$1" sh -c 'while :; do :; done' & done; }
python search_once.py warm cupy/10_pipelined fp32 2>>$OUT/err.log
python search_once.py idle cupy/10_pipelined fp32 2>>$OUT/err.log
spin 0; sleep 0.5; python search_once.py busy cupy/10_pipelined fp32 2>>$OUT/err.log; kill $(jobs -p); wait 2>/dev/null
spin 10; sleep 0.5; python search_once.py busy-nice10 cupy/10_pipelined fp32 2>>$OUT/err.log; kill $(jobs -p); wait 2>/dev/null
python search_once.py idle-again cupy/10_pipelined fp32 2>>$OUT/err.log
