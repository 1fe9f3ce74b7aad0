"""Evidence bundles: nvidia-smi (table and CSV), fuser -v, collect_env, read into events."""

from triage.ingest.lines import peel
from triage.parse.sysinfo import BundleReader
from triage.units import MiB

SMI_TABLE = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.133.20             Driver Version: 570.133.20     CUDA Version: 12.8     |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   36C    P0            118W /  700W |   32601MiB /  81559MiB |     41%      Default |
|=========================================================================================|
|    0   N/A  N/A            2977      C   /usr/bin/python3                       32592MiB |
|    0   N/A  N/A            3011      G   /usr/lib/xorg/Xorg                       114MiB |
"""
OLD_TABLE_PROCESS = "|    1     21807      C   python                                      15236MiB |"
CSV = """\
index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB], driver_version
0, NVIDIA A100-SXM4-40GB, 40960 MiB, 38000 MiB, 2960 MiB, 535.104.05
pid, process_name, used_gpu_memory [MiB]
5512, python3, 37990 MiB
"""
FUSER = """\
                     USER        PID ACCESS COMMAND
/dev/nvidia0:        root      31877 F...m python3
/dev/nvidiactl:      root      31877 F...m python3
"""
ENV = """\
PyTorch version: 2.6.0+cu124
CUDA used to build PyTorch: 12.4
Nvidia driver version: 550.54.15
GPU models and configuration:
GPU 0: NVIDIA L40S
vLLM Version: 0.8.5.post1
"""


def read(text):
    reader = BundleReader()
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        out.extend(reader.read(peel(raw, no)))
    return out


def test_nvidia_smi_table():
    evs = read(SMI_TABLE)
    info = next(e for e in evs if e.kind == "system_info")
    assert (info.driver_version, info.cuda_version) == ("570.133.20", "12.8")
    gpu = next(e for e in evs if e.kind == "gpu_info")
    assert (gpu.index, gpu.name, gpu.total, gpu.used) == (0, "NVIDIA H100 80GB HBM3", 81559 * MiB, 32601 * MiB)
    procs = [(e.pid, e.name, e.bytes) for e in evs if e.kind == "gpu_process"]
    assert procs == [(2977, "/usr/bin/python3", 32592 * MiB), (3011, "/usr/lib/xorg/Xorg", 114 * MiB)]


def test_old_nvidia_smi_process_row():
    (p,) = read(OLD_TABLE_PROCESS)
    assert (p.gpu, p.pid, p.name, p.bytes) == (1, 21807, "python", 15236 * MiB)


def test_csv_queries():
    evs = read(CSV)
    gpu = next(e for e in evs if e.kind == "gpu_info")
    assert (gpu.name, gpu.total, gpu.free) == ("NVIDIA A100-SXM4-40GB", 40960 * MiB, 2960 * MiB)
    (p,) = [e for e in evs if e.kind == "gpu_process"]
    assert (p.pid, p.name, p.bytes) == (5512, "python3", 37990 * MiB)


def test_fuser():
    procs = [e for e in read(FUSER) if e.kind == "gpu_process"]
    assert {(p.pid, p.name, p.user) for p in procs} == {(31877, "python3", "root")}


def test_collect_env():
    evs = read(ENV)
    assert any(e.kind == "engine_config" and e.version == "0.8.5.post1" for e in evs)
    assert any(e.kind == "system_info" and e.torch_version == "2.6.0+cu124" for e in evs)
    assert any(e.kind == "gpu_info" and e.name == "NVIDIA L40S" for e in evs)
