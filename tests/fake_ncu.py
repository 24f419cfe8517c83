"""Stands in for Nsight Compute where there is none (CI): takes its options as the profile stage passes them, writes
the committed raw export of a real H100 run (tests/data/ncu-raw-cupy12-h100.csv) into --log-file, and runs the
command after its options, as ncu does; FAKE_NCU_RESTRICTED=1 writes what ncu says where counters are not permitted."""
import os
import subprocess
import sys
from pathlib import Path

args = sys.argv[1:]
with_value = {"--clock-control", "--profile-from-start", "--target-processes", "--metrics", "--page",
              "--print-units", "--log-file"}
options, i = {}, 0
while args[i].startswith("--"):
    options[args[i]] = args[i + 1] if args[i] in with_value else True
    i += 2 if args[i] in with_value else 1
export = Path(__file__).parent / "data" / "ncu-raw-cupy12-h100.csv"
Path(options["--log-file"]).write_text("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"
                                       if os.environ.get("FAKE_NCU_RESTRICTED") == "1" else export.read_text())
sys.exit(subprocess.call(args[i:]))
