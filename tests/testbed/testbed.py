# -*- coding: utf-8 -*-
# Copyright (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated GPU fleet for gpufleet.nodeprep: the fleet manager.

Each node is a systemd-nspawn container booted with systemd, on an overlayfs
over one cached Debian base image, in its own network namespace that the host
reaches through a veth pair (10.231.0.0/16, on the testbed's own veths only).

    testbed.py up [--nodes N]      bring the fleet up (safe to run again)
    testbed.py down [--purge]      stop everything, leave no namespace, mount or process
    testbed.py status [--json]
    testbed.py fault NODE KIND [--gpu I] [--value V]
    testbed.py heal NODE [KIND]
    testbed.py ssh NODE [COMMAND...]

Run as root. See tests/testbed/README.md for what is simulated and what is real.
"""

from __future__ import absolute_import, division, print_function

import argparse
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import shutil
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STATE_DIR = os.environ.get('TESTBED_DIR') or os.path.join(REPO, '.testbed')
CACHE_DIR = os.environ.get('TESTBED_CACHE') or '/var/cache/nodeprep-testbed'
BASE_FILES = os.path.join(HERE, 'base')
DOUBLE_DIR = os.path.join(HERE, 'gpu_double')
REPOS_BUILD = os.path.join(HERE, 'repos', 'build.py')
sys.path.insert(0, HERE)
import slurmconf  # noqa: E402  (tests/testbed/slurmconf.py: the Slurm fleet's configuration files)

# TESTBED_PREFIX and TESTBED_SUBNET let a second fleet (another checkout) run beside the default one.
PREFIX = os.environ.get('TESTBED_PREFIX') or 'nptb'   # netns nptb-<node>, veths nptb<i>h / nptb<i>n
SUBNET = tuple(int(x) for x in (os.environ.get('TESTBED_SUBNET') or '10.231').split('.'))  # node i: 10.231.x.(4i+1)/30


def machine_name(name):
    """systemd-nspawn's machine name: the node name for the default fleet, prefixed for any other."""
    return name if PREFIX == 'nptb' else '{0}-{1}'.format(PREFIX, name)


BOOT_TIMEOUT = int(os.environ.get('TESTBED_BOOT_TIMEOUT', '120'))
NSPAWN_REBOOT_RC = 133

SUITE = 'bookworm'
MIRROR = os.environ.get('TESTBED_MIRROR', 'http://deb.debian.org/debian')
BASE_RECIPE = 3                      # bump when build_base() changes what it makes
BASE_PACKAGES = [
    'systemd', 'systemd-sysv', 'dbus', 'openssh-server', 'python3', 'python3-apt',
    'iproute2', 'ethtool', 'kmod', 'procps', 'pciutils', 'sudo', 'gawk',
    'dnf', 'python3-dnf', 'dnf-plugins-core', 'rpm',
]
TIMERS_MASKED = ['apt-daily.timer', 'apt-daily-upgrade.timer', 'dpkg-db-backup.timer',
                 'e2scrub_all.timer', 'fstrim.timer']

# flavour: what a node pretends to be.
FLAVOURS = {
    # EL8 always has /usr/libexec/platform-python (the system Python 3.6 that dnf and system tools use); units that
    # must run without the optional python3 package call it. Here it is the node's only Python.
    'el8': {'os_dir': 'rocky8', 'family': 'redhat', 'pkg': 'rpm', 'major': 8,
            'links': {'usr/libexec/platform-python': '/usr/bin/python3'}},
    'el9': {'os_dir': 'rocky9', 'family': 'redhat', 'pkg': 'rpm', 'major': 9},
    'el10': {'os_dir': 'rocky10', 'family': 'redhat', 'pkg': 'rpm', 'major': 10},
    'ubuntu2404': {'os_dir': 'ubuntu2404', 'family': 'debian', 'pkg': 'deb', 'major': 24},
}

# The default fleet, cycled when NODES is larger: (flavour, GPU model, wanted profile names, driver branch).
# One node type runs a branch below 580, where NVIDIA names the fabric manager packages differently (REALITY.md).
TEMPLATES = [
    ('el9', 'b200', ['hgx-b200-8gpu'], '580'),
    ('el8', 'h100', ['hgx-h100-8gpu'], '570'),
    ('ubuntu2404', 'h200', ['hgx-h200-8gpu', 'hgx-h100-8gpu'], '580'),
    ('el10', 'b200', ['hgx-b200-8gpu'], '580'),
]
# Node kinds only --kinds / TESTBED_KINDS picks (the default fleet stays the four above): a GB200 NVL72 compute tray
# (4 GPUs, no local NVSwitch, fabric registered by the switch trays; an x86_64 node with the GB200's profile - the
# real tray is arm64, see REALITY.md).
EXTRA_TEMPLATES = [
    ('el9', 'gb200', ['gb200-4gpu'], '580'),
]
# An IMEX fleet (up --imex, opt-in): its GB200/GB300 trays are one IMEX domain, the inventory group IMEX_GROUP
# (nodeprep_imex_domain_group, nodeprep_nvidia_driver_imex), routed to each other as a rack's management network is.
IMEX_GPUS = ('gb200', 'gb300')
IMEX_GROUP = 'nvl72_rack01'

# The Slurm fleet (up --slurm, opt-in). The head node has no GPU and runs slurmctld; every GPU node runs slurmd.
# TESTBED_SLURM_VERSION picks the Slurm (tests/testbed/REALITY.md, "Slurm"):
#  * 24.11 (the default): Debian 13's packages, in a Debian 13 root of their own inside the node (/opt/slurm-24.11,
#    a cached layer made by debootstrap); munge, slurmd and slurmctld run there (systemd RootDirectory=), the node's
#    own files (passwd, /etc/slurm, /run, /proc, ...) bound in, and /usr/bin/s* of the node run the client there;
#  * 22.05: Debian 12's packages, installed with apt in the node (the node's userspace is Debian 12).
# Both are cached layers per OS flavour and role, above the OS layer.
SLURM_VERSIONS = {
    '24.11': {'suite': 'trixie', 'debian': 13, 'root': '/opt/slurm-24.11'},
    '22.05': {'suite': 'bookworm', 'debian': 12, 'root': None},
}
SLURM_DEFAULT_VERSION = '24.11'
SLURM_RECIPE = 1                     # bump when ensure_slurm_layer() changes what it makes
SLURM_ROOT_RECIPE = 1                # bump when ensure_slurm_root() changes what it makes
SLURM_ROOT_LAYER_RECIPE = 2          # bump when ensure_slurm_root_layer() or slurm_root_files() change what they make
SLURM_PACKAGES = {
    'head': ['slurmctld', 'slurm-client', 'munge'],
    'node': ['slurmd', 'slurm-client', 'munge'],
}
# The Debian 13 root holds both daemons (one cached root for the head and the nodes); systemd-sysv gives it
# /usr/sbin/reboot, the RebootProgram slurmd runs there.
SLURM_ROOT_PACKAGES = ['slurmctld', 'slurmd', 'slurm-client', 'munge', 'systemd-sysv']
# The node's own paths seen in the Slurm root (bound at boot by testbed-slurm-root.service, before munge): the
# kernel's API file systems, the node's runtime and temporary directories, its users, its Slurm and munge files.
SLURM_ROOT_DIRS = ('proc', 'sys', 'dev', 'run', 'tmp', 'var/tmp', 'root', 'home', 'etc/slurm', 'etc/munge',
                   'var/lib/munge', 'var/log/munge', 'var/lib/slurm', 'var/log/slurm')
SLURM_ROOT_FILES = ('etc/passwd', 'etc/group', 'etc/shadow', 'etc/gshadow', 'etc/hosts', 'etc/hostname',
                    'etc/machine-id')
SLURM_HEAD = 'slurm-head'
SLURM_HEAD_FLAVOUR = 'el9'
SLURM_HEAD_INDEX = 16383             # the last /30 of the subnet: GPU nodes keep the addresses of the plain fleet

# What a root shell on a real node may do that systemd-nspawn's default set leaves out, as far as it is safe on a
# shared host: CAP_NET_ADMIN (each node has its own network namespace: ethtool -K, ip link set), CAP_IPC_LOCK
# (mlock) and CAP_SYS_RESOURCE (raise a hard resource limit: without it the node's systemd cannot give a service the
# LimitMEMLOCK=infinity its unit asks for, and slurmd ran with PID 1's 8 MiB; REALITY.md, "Nodes"). Never
# CAP_SYS_MODULE or CAP_SYS_TIME: they would act on the host's kernel and clock.
NODE_CAPABILITIES = ('CAP_NET_ADMIN', 'CAP_IPC_LOCK', 'CAP_SYS_RESOURCE')

# Fault kinds. 'flag' faults are handled by the GPU double inside the node (it
# reads /var/lib/testbed/faults/<flag>); the others are the fleet manager's own.
FAULTS = {
    'gpu-missing': {'flag': 'gpu-missing',
                    'help': 'one GPU lost (fell off the bus): nvidia-smi keeps the other indexes, prints "Unable to '
                            'determine the device handle for gpu <bus id>: Unknown Error" and exits 15; still on the '
                            'PCI bus (--gpu index or bus id, default the last GPU; --value lost: "GPU is lost. Reboot '
                            'the system to recover this GPU")'},
    'gpu-removed': {'flag': 'gpu-removed',
                    'help': 'one GPU gone from the PCI bus and nvidia-smi; the others renumber (--gpu; default the '
                            'last GPU)'},
    'clocks-capped': {'flag': 'clocks-capped',
                      'help': 'clock locks report success but the GPUs run lower (--value graphics MHz cap, default '
                              '85 percent of the maximum)'},
    'power-capped': {'flag': 'power-capped',
                     'help': 'out-of-band power cap: enforced power limit below the requested one (--value watts, '
                             'default 70 percent of the default limit)'},
    'secure-boot': {'flag': 'secure-boot',
                    'help': 'UEFI Secure Boot on with no enrolled MOK: the nvidia module is rejected ("Key was '
                            'rejected by service"); mokutil --sb-state says enabled'},
    'nvidia-smi-hang': {'flag': 'nvidia-smi-hang', 'help': 'nvidia-smi never returns'},
    'driver-unloaded': {'flag': 'driver-unloaded', 'help': 'the nvidia driver is not loaded; /proc/driver/nvidia gone'},
    'xid': {'flag': 'xid', 'help': 'an Xid event in the kernel log (--value Xid code, default 79; --gpu, default 0)'},
    'retired-pages': {'flag': 'retired-pages-pending', 'help': 'page retirement pending (--gpu; default every GPU)'},
    'remapped-rows': {'flag': 'remapped-rows-pending', 'help': 'row remapping pending (--gpu; default every GPU)'},
    'dcgm-diag-fail': {'flag': 'dcgm-diag-fail',
                       'help': "DCGM's software test (dcgmi diag, every level) fails on one GPU with DCGM's "
                               '"Page Retirement/Row Remap" warning (error 85, severity RESET) (--gpu; default the '
                               'last GPU)'},
    'shm-full': {'flag': 'shm-full', 'help': '/dev/shm filled to 0 bytes free (--value: most bytes of RAM to use, default 2 GiB)'},
    'node-down': {'flag': 'node-down', 'help': 'the node is cut off the network (host side of its veth down)'},
    'ssh-hang': {'flag': 'ssh-hang',
                 'help': 'the node hangs: every process of it is frozen (cgroup v2 freezer) while its kernel still '
                         'answers, so a TCP connection to sshd is accepted and never gets a banner (REALITY.md, '
                         '"A hung node"); heal thaws it'},
    'acs-on': {'flag': 'acs-on',
               'help': 'PCIe ACS on (ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+, as firmware leaves it) at the '
                       'switch downstream port above a GPU (--gpu index or bus id of a GPU or NIC, default GPU 0); set '
                       'again at every boot'},
    'peermem-unloaded': {'flag': 'peermem-unloaded',
                         'help': 'nvidia_peermem not loaded (/sys/module/nvidia_peermem gone) although asked for'},
    'rdma-no-peer-api': {'flag': 'rdma-no-peer-api',
                         'help': 'the inbox RDMA stack: /proc/kallsyms lacks ib_register_peer_memory_client and '
                                 'modprobe nvidia_peermem fails with "Unknown symbol in module"'},
    'peermem-no-ofed': {'flag': 'peermem-no-ofed',
                        'help': 'nvidia_peermem built before MLNX_OFED/DOCA-OFED: modinfo -F depends nvidia_peermem is '
                                'empty (no ib_core) and modprobe nvidia_peermem fails with "Invalid argument" (its '
                                'init returns -EINVAL), although /proc/kallsyms has the peer-memory API'},
    'virtual-machine': {'flag': 'virtual-machine',
                        'help': 'the node is a virtual machine: systemd-detect-virt --vm prints kvm (--value: another '
                                'name) and exits 0'},
    'dkms-build-fails': {'flag': 'dkms-build-fails',
                         'help': 'a kernel the NVIDIA driver cannot be built for (R24): dkms install/autoinstall of '
                                 'the NVIDIA modules fail for it ("Bad return status for module build", exit 10, '
                                 'build/make.log left) (--value: a uname -r glob, default the fleet\'s ELRepo '
                                 'kernel-ml 6.16.7-*.elrepo.*, standing in for the 7.x kernels of the reports)'},
    'devel-missing': {'flag': 'devel-missing',
                      'help': 'a custom kernel whose devel/headers are in no repository: the installed ones removed, '
                              'dnf excludes kernel*-devel*, apt pins linux-headers-* to -1 (heal lifts the exclusion)'},
    'ubuntu-signed': {'flag': 'ubuntu-signed',
                      'help': "Ubuntu nodes: Ubuntu's Canonical-signed driver installed from the node's archive, as "
                              "NVIDIA's precompiled driver container installs it (nvidia-headless-no-dkms-580-server-"
                              'open, nvidia-utils-580-server and linux-modules-nvidia-580-server-open-<running '
                              'kernel>, no DKMS; --value KERNEL also that kernel\'s modules); heal leaves the packages, '
                              'as on a real node'},
    'limits-site-file': {'flag': 'limits-site-file',
                         'help': 'a site file read after the memlock role\'s own: /etc/security/limits.d/99-site.conf '
                                 'with "* hard memlock 65536" (--value: the KiB, default 65536); every ordinary user '
                                 'is held at 64 MiB, root is not (heal removes the file)'},
    'ubuntu-dkms': {'flag': 'ubuntu-dkms',
                    'help': "Ubuntu nodes: Ubuntu's DKMS flavour from the node's archive (nvidia-driver-580-server-open, "
                            'which pulls nvidia-dkms-580-server-open: what ubuntu-drivers falls back to where no module '
                            'package exists for the kernel); heal leaves the packages'},
    'kernel-update': {'flag': 'kernel-update',
                      'help': "Ubuntu nodes: a kernel update outside the collection, as apt upgrade brings it: "
                              "linux-image-generic installed from the node's archive, whose kernel (newer than the "
                              'running one, GRUB boots it next) has no linux-modules-nvidia-* package; heal leaves the '
                              'packages'},
    'dkms-stale-tree': {'flag': 'dkms-stale-tree',
                        'help': 'a stale NVIDIA DKMS tree (dkms-project/dkms#352): /var/lib/dkms/<module>/<version> '
                                'built for the running kernel, its source link dangling (the source removed without '
                                'dkms remove); dkms 3.0.x (the Ubuntu nodes) then lists nothing past it, says so on '
                                'stderr only and exits 0 (--value MODULE/VERSION, default nvidia/535.104.05; EL nodes: '
                                'nvidia-open/535.104.05); heal removes the tree'},
    'dcgm3': {'flag': 'dcgm3',
              'help': "NVIDIA DCGM 3.x (datacenter-gpu-manager 1:3.3.9 of the node's CUDA repository folder) "
                      'installed and nvidia-dcgm.service enabled and started; heal leaves the package'},
}

# limits-site-file, written inside the node: a site's own limits.d file, read after 90-nodeprep-memlock.conf
# (pam_limits reads limits.d in C-locale order; tests/testbed/REALITY.md, "Nodes").
LIMITS_SITE_FILE = '/etc/security/limits.d/99-site.conf'
LIMITS_SITE_APPLY = "printf '%s\\n' '# testbed fault limits-site-file' '* hard memlock {kib}' > " + LIMITS_SITE_FILE

# ubuntu-signed, applied inside the node with apt from the node's own archive (tests/testbed/REALITY.md, "Ubuntu's
# signed driver"): what ubuntu-drivers or the GPU Operator's precompiled container install.
UBUNTU_SIGNED_APPLY = ("set -e; export DEBIAN_FRONTEND=noninteractive; apt-get -q update >/dev/null; "
                       "apt-get -y -q install --no-install-recommends nvidia-headless-no-dkms-580-server-open "
                       "nvidia-utils-580-server linux-modules-nvidia-580-server-open-$(uname -r) {extra}")
# ubuntu-dkms and kernel-update, the same way (tests/testbed/REALITY.md: "Ubuntu's signed driver", "A kernel without
# signed modules").
UBUNTU_DKMS_APPLY = ("set -e; export DEBIAN_FRONTEND=noninteractive; apt-get -q update >/dev/null; "
                     "apt-get -y -q install --no-install-recommends nvidia-driver-580-server-open")
KERNEL_UPDATE_APPLY = ("set -e; export DEBIAN_FRONTEND=noninteractive; apt-get -q update >/dev/null; "
                       "apt-get -y -q install --no-install-recommends linux-image-generic")
# dkms-stale-tree: a version tree built for the running kernel whose source link points at a removed source
# (dkms-project/dkms#352; tests/testbed/REALITY.md "A stale DKMS tree").
DKMS_STALE_APPLY = ("set -e; t=/var/lib/dkms/{mv}; k=$(uname -r); mkdir -p $t/$k/x86_64/module; "
                    ": > $t/$k/x86_64/module/nvidia.ko; ln -sfn /usr/src/{src} $t/source")
DKMS_STALE_HEAL = 'rm -rf /var/lib/dkms/{mv}; rmdir --ignore-fail-on-non-empty /var/lib/dkms/{module} || true'
# dcgm3: DCGM 3.x from the fleet's CUDA repository folder, the unit enabled and started (tests/testbed/REALITY.md
# "DCGM 3.x").
DCGM3_APPLY = {
    'rpm': ("set -e; dnf -y -q --nogpgcheck --repofrompath=testbed-dcgm3,file:///srv/testbed-repos/{os}/cuda "
            "--repo=testbed-dcgm3 install datacenter-gpu-manager-1:3.3.9; systemctl enable --now nvidia-dcgm"),
    'deb': ("set -e; export DEBIAN_FRONTEND=noninteractive; "
            "dpkg -i /srv/testbed-repos/apt/cuda/datacenter-gpu-manager_3.3.9_amd64.deb; "
            "systemctl enable --now nvidia-dcgm"),
}

# devel-missing, applied inside the node with its package manager's own configuration (dnf.conf(5) excludepkgs,
# apt_preferences(5) a negative Pin-Priority): sh scripts run with nsenter; the marker line finds what heal removes.
DEVEL_MISSING_MARK = '# testbed fault devel-missing'
DEVEL_MISSING_APT = '/etc/apt/preferences.d/testbed-devel-missing'
DEVEL_MISSING_APPLY = {
    'rpm': ("grep -qx '{mark}' /etc/dnf/dnf.conf || printf '%s\\n' '{mark}' "
            "'excludepkgs=kernel-devel* kernel-lt-devel* kernel-ml-devel*' >> /etc/dnf/dnf.conf; "
            "rpm -qa --qf '%{{NAME}}\\n' | grep -E '^kernel(-lt|-ml)?-devel' | xargs -r rpm -e --nodeps"),
    'deb': ("printf '%s\\n' 'Explanation: {mark}' 'Package: linux-headers-*' 'Pin: version *' 'Pin-Priority: -1' > {apt}; "
            "dpkg-query -W -f '${{Package}}\\n' 'linux-headers-*' 2>/dev/null | "
            "xargs -r env DEBIAN_FRONTEND=noninteractive apt-get -y -q purge"),
}
DEVEL_MISSING_HEAL = {
    'rpm': "sed -i '/^{mark}$/,+1d' /etc/dnf/dnf.conf",
    'deb': 'rm -f {apt}',
}

# Faults that change what the GPU double shows in sysfs (PCI devices, EFI variables): refreshed at once.
GPU_DOUBLE_VIEW_FAULTS = ('gpu-removed', 'secure-boot', 'acs-on', 'peermem-unloaded', 'rdma-no-peer-api',
                          'peermem-no-ofed')

# Issue 19, fabric and NVLink topology (flags read by the GPU double; lib/gpudouble.py names them).
FAULTS['fabric-in-progress'] = {
    'flag': 'fabric-in-progress',
    'help': 'the NVLink fabric never completes on one GPU: fabric state In Progress, status N/A (GB200/GB300 trays '
            'the switch trays did not register; --gpu, default the last GPU)'}
# Issue 29: a node whose reboot takes long (a real HGX node's firmware, BMC and memory training take minutes).
FAULTS['slow-boot'] = {
    'flag': 'slow-boot',
    'help': 'each reboot keeps the node off for --value seconds (default 150) before it boots again, as firmware '
            'and memory training do on a real GPU node; read by the node\'s runner at every reboot'}
SLOW_BOOT_DEFAULT_S = 150

FAULTS['nvlink-down'] = {
    'flag': 'nvlink-down',
    'help': 'NVLinks down between two GPUs in nvidia-smi topo -m (--gpu "A B", default "0 1"; --value links left, '
            'default 0: the pair shows its PCIe relation NODE/SYS)'}


# Issue 30, IMEX domains (the flag is read by the GPU double's nvidia-imex: lib/imex_double.py).
FAULTS['imex-peer-down'] = {
    'flag': 'imex-peer-down',
    'help': "the node's nvidia-imex stops answering (its sockets closed, the process still running: a hung or cut-off "
            'daemon): the other nodes of its IMEX domain see it UNAVAILABLE and their connections to it RECOVERING'}

# Issue 28, fitness (flags read by the GPU double: lib/gpudouble.py, gpu_double/REALITY.md "Fitness faults").
# --gpu takes one GPU or a comma list (default the last GPU); --value the words of the fault.
FITNESS_GPU_FAULTS = ('hw-slowdown', 'pcie-downtrained', 'nvlink-inactive', 'rows-pending', 'mig-enabled')
FAULTS['hw-slowdown'] = {
    'flag': 'hw-slowdown',
    'help': 'a hardware slowdown: clocks event reasons HW Slowdown and HW Power Brake Slowdown Active (--value '
            'thermal: HW Thermal Slowdown), graphics/SM clocks at a quarter of the maximum (--gpu, default the last)'}
FAULTS['pcie-downtrained'] = {
    'flag': 'pcie-downtrained',
    'help': 'the PCIe link trained lower than it can: current width x8 (--value x4, x8,gen4 ...), max unchanged, '
            'host-to-device bandwidth scaled to the lanes and generation (--gpu, default the last)'}
FAULTS['nvlink-inactive'] = {
    'flag': 'nvlink-inactive',
    'help': 'NVLinks that did not come up: nvidia-smi nvlink -s prints <inactive> for them, the XML, topo -m and '
            'device-to-device bandwidth follow (--value link numbers "3,7" or all, default the last link; --gpu, '
            'default the last)'}
FAULTS['rows-pending'] = {
    'flag': 'rows-pending',
    'help': 'a row remap waits for a GPU reset: remapped rows Pending Yes, one more uncorrectable row, Xid 63 in the '
            'kernel log (--gpu, default the last)'}
FAULTS['mig-enabled'] = {
    'flag': 'mig-enabled',
    'help': 'MIG mode Enabled, current and pending (--value pending: pending Enabled, current still Disabled; --gpu, '
            'default the last)'}
FAULTS['allreduce-slow'] = {
    'flag': 'allreduce-slow',
    'help': 'all_reduce_perf reports a lower bus bandwidth: --value the factor (default 0.5); nvbandwidth untouched'}


class TestbedError(Exception):
    pass


def log(msg):
    sys.stderr.write('testbed: {0}\n'.format(msg))
    sys.stderr.flush()


def run(argv, check=True, quiet=False, **kw):
    """Run argv (a list); return CompletedProcess with str stdout/stderr."""
    kw.setdefault('stdout', subprocess.PIPE)
    kw.setdefault('stderr', subprocess.PIPE)
    env = dict(os.environ, LC_ALL='C', LANGUAGE='C')
    env.update(kw.pop('env', {}))
    proc = subprocess.run(argv, universal_newlines=True, env=env, check=False, **kw)
    if check and proc.returncode != 0:
        raise TestbedError('command failed (rc={0}): {1}\nstdout: {2}\nstderr: {3}'.format(
            proc.returncode, ' '.join(argv), (proc.stdout or '')[-2000:], (proc.stderr or '')[-2000:]))
    if not quiet and proc.returncode != 0:
        pass
    return proc


# --------------------------------------------------------------------------- state

def state_path(*parts):
    return os.path.join(STATE_DIR, *parts)


def node_dir(name, *parts):
    return state_path('nodes', name, *parts)


def load_state():
    try:
        with open(state_path('state.json')) as f:
            state = json.load(f)
    except (IOError, OSError, ValueError):
        return {'nodes': {}}
    owner = state.get('prefix', PREFIX)
    if owner != PREFIX and state.get('nodes'):
        # Another fleet's state: acting on it would stop that fleet's nodes. Each fleet needs its own TESTBED_DIR.
        raise TestbedError('{0} holds the fleet of TESTBED_PREFIX={1}, not {2}: give this fleet its own TESTBED_DIR, '
                           'or use TESTBED_PREFIX={1}'.format(STATE_DIR, owner, PREFIX))
    return state


def save_state(state):
    os.makedirs(STATE_DIR, exist_ok=True)
    state['prefix'] = PREFIX
    tmp = state_path('state.json.tmp')
    with open(tmp, 'w') as f:
        json.dump(state, f, indent=2, sort_keys=True)
        f.write('\n')
    os.rename(tmp, state_path('state.json'))


class CacheLock(object):
    """Held while the shared cache (base image, OS layers) is read or built."""

    def __enter__(self):
        os.makedirs(CACHE_DIR, exist_ok=True)
        self.fd = os.open(os.path.join(CACHE_DIR, '.lock'), os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
        return False


class Lock(object):
    def __init__(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        self.fd = os.open(state_path('.lock'), os.O_CREAT | os.O_RDWR, 0o644)

    def __enter__(self):
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError):
            log('another testbed command is running; waiting for it')
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


# --------------------------------------------------------------------------- fleet plan

def find_profile(wanted):
    pdir = os.path.join(DOUBLE_DIR, 'profiles')
    for name in wanted:
        path = os.path.join(pdir, name + '.json')
        if os.path.isfile(path):
            return name, path
    return wanted[0], None


def branch_overrides(text=None):
    """TESTBED_BRANCHES ('ubuntu2404-h200=590,el10-b200=570'): the driver branch per node kind, instead of the
    template's (e.g. the Ubuntu node on 590, where NVIDIA's apt extras carry -1ubuntu1, REALITY.md R21)."""
    text = os.environ.get('TESTBED_BRANCHES', '') if text is None else text
    by_key = {template_key(t): t for t in TEMPLATES}
    out = {}
    for item in [i.strip() for i in text.split(',') if i.strip()]:
        kind, sep, branch = item.partition('=')
        if not sep or kind not in by_key or not branch.isdigit():
            raise TestbedError('TESTBED_BRANCHES: {0!r} is not <kind>=<branch>; kinds: {1}'.format(
                item, ', '.join(sorted(by_key))))
        out[kind] = branch
    return out


def template_key(template):
    return '{0}-{1}'.format(template[0], template[1])


def select_templates(kinds):
    """The templates named by ``kinds`` ('el9-b200,ubuntu2404-h200' or a list), in that order; all when empty."""
    if not kinds:
        return list(TEMPLATES)
    if isinstance(kinds, str):
        kinds = [k.strip() for k in kinds.split(',') if k.strip()]
    by_key = {template_key(t): t for t in TEMPLATES + EXTRA_TEMPLATES}
    unknown = [k for k in kinds if k not in by_key]
    if unknown:
        raise TestbedError('unknown node kind(s) {0}; kinds: {1}'.format(', '.join(unknown), ', '.join(sorted(by_key))))
    return [by_key[k] for k in kinds]


def _addresses(i):
    third, fourth = divmod(4 * i, 256)
    return ('{0}.{1}.{2}.{3}'.format(SUBNET[0], SUBNET[1], third, fourth + 1),
            '{0}.{1}.{2}.{3}'.format(SUBNET[0], SUBNET[1], third, fourth + 2))


def plan_fleet(count, kinds=None, slurm=False, imex=False):
    """The fleet's nodes. ``kinds`` picks the node templates (cycled); ``slurm`` adds the head node (no GPU) and
    marks every node as part of the Slurm fleet; ``imex`` puts the GB200/GB300 trays in one IMEX domain (routed to
    each other)."""
    if count < 1:
        raise TestbedError('NODES must be at least 1, got {0}'.format(count))
    templates = select_templates(kinds)
    limit = SLURM_HEAD_INDEX if slurm else SLURM_HEAD_INDEX + 1
    if count > limit:
        raise TestbedError('at most {0} nodes fit in {1}.{2}.0.0/16{3}, asked for {4}'.format(
            limit, SUBNET[0], SUBNET[1], ' beside the Slurm head' if slurm else '', count))
    nodes = []
    seen = {}
    branches = branch_overrides()
    for i in range(count):
        flavour, gpu, wanted, branch = templates[i % len(templates)]
        branch = branches.get(template_key(templates[i % len(templates)]), branch)
        key = (flavour, gpu)
        seen[key] = seen.get(key, 0) + 1
        name = '{0}-{1}-{2:02d}'.format(flavour, gpu, seen[key])
        profile, profile_path = find_profile(wanted)
        host_ip, node_ip = _addresses(i)
        nodes.append({
            'name': name, 'index': i, 'flavour': flavour, 'gpu': gpu,
            'profile': profile, 'profile_path': profile_path, 'branch': branch,
            'family': FLAVOURS[flavour]['family'],
            'host_ip': host_ip,
            'node_ip': node_ip,
            'netns': '{0}-{1}'.format(PREFIX, name),
            'veth_host': '{0}{1}h'.format(PREFIX, i),
            'veth_node': '{0}{1}n'.format(PREFIX, i),
        })
    if imex:
        for n in nodes:
            if n['gpu'] in IMEX_GPUS:
                n['imex'] = IMEX_GROUP
    if slurm:
        for n in nodes:
            n['slurm'] = 'node'
        host_ip, node_ip = _addresses(SLURM_HEAD_INDEX)
        nodes.append({
            'name': SLURM_HEAD, 'index': SLURM_HEAD_INDEX, 'flavour': SLURM_HEAD_FLAVOUR, 'gpu': None,
            'profile': None, 'profile_path': None, 'branch': None, 'slurm': 'head',
            'family': FLAVOURS[SLURM_HEAD_FLAVOUR]['family'],
            'host_ip': host_ip, 'node_ip': node_ip,
            'netns': '{0}-{1}'.format(PREFIX, SLURM_HEAD),
            'veth_host': '{0}{1}h'.format(PREFIX, SLURM_HEAD_INDEX),
            'veth_node': '{0}{1}n'.format(PREFIX, SLURM_HEAD_INDEX),
        })
    return nodes


# --------------------------------------------------------------------------- base image

def tree_hash(paths, extra=''):
    h = hashlib.sha256(extra.encode('utf-8'))
    for top in paths:
        if not os.path.exists(top):
            h.update(('missing:' + top).encode('utf-8'))
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for fn in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
                p = os.path.join(dirpath, fn)
                h.update(os.path.relpath(p, top).encode('utf-8'))
                if os.path.islink(p):
                    h.update(('->' + os.readlink(p)).encode('utf-8'))
                else:
                    h.update(str(os.stat(p).st_mode & 0o777).encode('utf-8'))
                    with open(p, 'rb') as f:
                        h.update(f.read())
    return h.hexdigest()[:16]


def base_key():
    return hashlib.sha256(json.dumps([SUITE, MIRROR, BASE_PACKAGES, TIMERS_MASKED, BASE_RECIPE]).encode('utf-8')).hexdigest()[:16]


def ensure_base():
    key = base_key()
    top = os.path.join(CACHE_DIR, 'base-' + key)
    rootfs = os.path.join(top, 'rootfs')
    if os.path.exists(os.path.join(top, 'complete')):
        return key, rootfs
    log('building the base image (debootstrap {0}, cached in {1}); this takes a minute or two'.format(SUITE, top))
    tmp = os.path.join(top, 'rootfs.tmp')
    os.makedirs(top, exist_ok=True)
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    for leftover in (rootfs,):
        if os.path.exists(leftover):
            shutil.rmtree(leftover)
    t0 = time.time()
    run(['debootstrap', '--variant=minbase', '--include=' + ','.join(BASE_PACKAGES), SUITE, tmp, MIRROR])
    # What every node shares: no network apt sources, quiet timers, empty machine-id.
    for timer in TIMERS_MASKED:
        link = os.path.join(tmp, 'etc/systemd/system', timer)
        if not os.path.lexists(link):
            os.symlink('/dev/null', link)
    with open(os.path.join(tmp, 'etc/machine-id'), 'w') as f:
        f.write('')
    shutil.rmtree(os.path.join(tmp, 'var/cache/apt/archives'), ignore_errors=True)
    os.makedirs(os.path.join(tmp, 'var/cache/apt/archives/partial'), exist_ok=True)
    os.rename(tmp, rootfs)
    with open(os.path.join(top, 'complete'), 'w') as f:
        json.dump({'suite': SUITE, 'packages': BASE_PACKAGES, 'seconds': round(time.time() - t0)}, f)
    log('base image ready in {0:.0f} s'.format(time.time() - t0))
    return key, rootfs


def copy_tree(src, dst):
    """Copy src into dst (files and symlinks, modes kept), overwriting."""
    if not os.path.isdir(src):
        return
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        target_dir = os.path.normpath(os.path.join(dst, rel))
        if not os.path.isdir(target_dir):
            os.makedirs(target_dir, exist_ok=True)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            s = os.path.join(dirpath, name)
            d = os.path.join(target_dir, name)
            if os.path.lexists(d) and (os.path.islink(d) or not os.path.isdir(d)):
                os.unlink(d)
            if os.path.islink(s):
                os.symlink(os.readlink(s), d)
            else:
                shutil.copy2(s, d)


def mount_overlay(lowers, upper, work, merged):
    for d in (upper, work, merged):
        os.makedirs(d, exist_ok=True)
    if os.path.ismount(merged):
        return
    opts = 'lowerdir={0},upperdir={1},workdir={2}'.format(':'.join(lowers), upper, work)
    run(['mount', '-t', 'overlay', 'overlay', '-o', opts, merged])


def umount(path):
    if os.path.ismount(path):
        if run(['umount', path], check=False).returncode != 0:
            run(['umount', '-l', path], check=False)


def nspawn_run(root, argv, binds=(), check=True, rw_binds=(), network=False, volatile=False):
    """Run argv in a container on root (not booted). No network unless ``network`` (then the host's: only for
    fetching packages); ``volatile`` throws the container's changes to root away (tmpfs overlay)."""
    cmd = ['systemd-nspawn', '--quiet', '--register=no', '--keep-unit', '--pipe',
           '-D', root, '-M', PREFIX + '-build-' + uuid.uuid4().hex[:8]]
    if not network:
        cmd.append('--private-network')
    if volatile:
        cmd.append('--volatile=overlay')
    for b in binds:
        cmd.append('--bind-ro=' + b)
    for b in rw_binds:
        cmd.append('--bind=' + b)
    return run(cmd + ['--'] + list(argv), check=check)


def repos_dir():
    return state_path('repos')


def kernel_packages_present(flavour):
    f = FLAVOURS[flavour]
    if f['pkg'] == 'rpm':
        path = os.path.join(repos_dir(), 'el{0}'.format(f['major']), 'baseos', 'repodata', 'repomd.xml')
    else:
        path = os.path.join(repos_dir(), 'apt', 'debian', 'Packages')
    return os.path.exists(path)


def install_running_kernel(flavour, merged):
    """Make the node's package database say the host's running kernel is installed."""
    release = os.uname().release
    f = FLAVOURS[flavour]
    binds = [repos_dir() + ':/srv/testbed-repos']
    if f['pkg'] == 'rpm':
        base = ['dnf', '-y', '--setopt=install_weak_deps=False', '--setopt=reposdir=/etc/yum.repos.d',
                '--releasever={0}'.format(f['major'])]
        # The distro kernel packages provide kernel-uname-r = <uname -r>, as EL's do.
        spec = 'kernel-uname-r = {0}'.format(release)
        proc = nspawn_run(merged, base + ['install', spec], binds=binds, check=False)
        if proc.returncode != 0:
            raise TestbedError('cannot install the running kernel ({0}) in the {1} layer from the local repository: '
                               '{2}'.format(spec, flavour, (proc.stdout + proc.stderr)[-1500:]))
        # The meta package and the module tree of that same version, as a distro install has them.
        vr = nspawn_run(merged, ['rpm', '-qf', '/lib/modules/{0}/vmlinuz'.format(release),
                                 '--qf', '%{NAME} %{VERSION}-%{RELEASE}\\n'])
        core, evr = vr.stdout.split()[:2]
        stem = core[:-len('-core')] if core.endswith('-core') else core
        nspawn_run(merged, base + ['install', '{0}-{1}'.format(stem, evr), '{0}-modules-{1}'.format(stem, evr)],
                   binds=binds)
        nspawn_run(merged, ['dnf', 'clean', 'all'], check=False)
    else:
        pkg = 'linux-image-{0}'.format(release)
        proc = nspawn_run(merged, ['sh', '-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive '
                                   'apt-get install -y -q --no-install-recommends {0} && apt-get clean'.format(pkg)],
                          binds=binds, check=False)
        if proc.returncode != 0:
            raise TestbedError('cannot install {0} in the {1} layer from the local repository: {2}'.format(
                pkg, flavour, (proc.stdout + proc.stderr)[-1500:]))
        shutil.rmtree(os.path.join(merged, 'var/lib/apt/lists'), ignore_errors=True)
        os.makedirs(os.path.join(merged, 'var/lib/apt/lists/partial'), exist_ok=True)


def ensure_layer(flavour, bkey, base_rootfs):
    f = FLAVOURS[flavour]
    have_kernel = kernel_packages_present(flavour)
    kernel_input = ''
    if have_kernel:
        sub = 'el{0}/baseos'.format(f['major']) if f['pkg'] == 'rpm' else 'apt/debian'
        meta = os.path.join(repos_dir(), sub, 'repodata', 'repomd.xml') if f['pkg'] == 'rpm' \
            else os.path.join(repos_dir(), sub, 'Packages')
        with open(meta, 'rb') as fh:
            kernel_input = hashlib.sha256(fh.read()).hexdigest()
    key = tree_hash([os.path.join(BASE_FILES, 'common'), os.path.join(BASE_FILES, 'os', f['os_dir'])],
                    extra=json.dumps([bkey, flavour, os.uname().release, kernel_input, sorted(f.get('links', {}).items())]))
    top = os.path.join(CACHE_DIR, 'layer-{0}-{1}'.format(flavour, key))
    upper = os.path.join(top, 'upper')
    if os.path.exists(os.path.join(top, 'complete')):
        return upper
    log('building the {0} layer ({1})'.format(flavour, top))
    merged = os.path.join(top, 'merged')
    umount(merged)
    for d in ('upper', 'work', 'merged'):
        shutil.rmtree(os.path.join(top, d), ignore_errors=True)
    mount_overlay([base_rootfs], upper, os.path.join(top, 'work'), merged)
    try:
        copy_tree(os.path.join(BASE_FILES, 'common'), merged)
        copy_tree(os.path.join(BASE_FILES, 'os', f['os_dir']), merged)
        for link, target in sorted(f.get('links', {}).items()):
            path = os.path.join(merged, link)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if os.path.lexists(path):
                os.unlink(path)
            os.symlink(target, path)
        for unit, target in (('testbed-early.service', 'sysinit.target.wants'),
                             ('testbed-faults.service', 'multi-user.target.wants')):
            wants = os.path.join(merged, 'etc/systemd/system', target)
            os.makedirs(wants, exist_ok=True)
            link = os.path.join(wants, unit)
            if not os.path.lexists(link):
                os.symlink('/etc/systemd/system/' + unit, link)
        for d in ('var/lib/testbed/faults', 'srv/testbed-repos', 'etc/testbed', 'var/lib/rpm'):
            os.makedirs(os.path.join(merged, d), exist_ok=True)
        if f['pkg'] == 'rpm':
            nspawn_run(merged, ['rpm', '--initdb'])
        if have_kernel:
            install_running_kernel(flavour, merged)
        else:
            log('WARNING: no local repository for {0} yet ({1}); the node will have no kernel package '
                'installed. Build the repositories (tests/testbed/repos/build.py) and run up again.'.format(
                    flavour, repos_dir()))
    finally:
        umount(merged)
    shutil.rmtree(os.path.join(top, 'work'), ignore_errors=True)
    # The key covers the repository metadata: once the repositories appear or
    # change, a new layer is built next to this one (nodes in use keep theirs).
    with open(os.path.join(top, 'complete'), 'w') as fh:
        fh.write(key + '\n')
    return upper


# --------------------------------------------------------------------------- Slurm layers

SLURM_APT = '/srv/slurm-apt'          # where the Debian package cache is bound during a Slurm layer build


def slurm_apt_options():
    """apt options that use only the Slurm cache's sources, lists and archives (not the node's own)."""
    return ['-o', 'Dir::Etc::sourcelist={0}/sources.list'.format(SLURM_APT), '-o', 'Dir::Etc::sourceparts=-',
            '-o', 'Dir::State::Lists={0}/lists'.format(SLURM_APT),
            '-o', 'Dir::Cache::Archives={0}/archives'.format(SLURM_APT), '-o', 'APT::Sandbox::User=root',
            '-o', 'Dir::Cache::pkgcache=', '-o', 'Dir::Cache::srcpkgcache=']


def slurm_packages():
    return sorted(set(p for pkgs in SLURM_PACKAGES.values() for p in pkgs))


def ensure_slurm_apt(bkey, base_rootfs):
    """Debian's package lists and the Slurm packages with their dependencies, downloaded once (the only step that
    needs the Debian mirror) into the cache; the layers install from there without a network."""
    key = hashlib.sha256(json.dumps([bkey, SUITE, MIRROR, slurm_packages()]).encode('utf-8')).hexdigest()[:16]
    top = os.path.join(CACHE_DIR, 'slurm-apt-' + key)
    if os.path.exists(os.path.join(top, 'complete')):
        return key, top
    log('downloading Slurm and munge from {0} ({1}) into {2}'.format(MIRROR, ', '.join(slurm_packages()), top))
    t0 = time.time()
    shutil.rmtree(top, ignore_errors=True)
    for d in ('lists/partial', 'archives/partial'):
        os.makedirs(os.path.join(top, d))
    with open(os.path.join(top, 'sources.list'), 'w') as f:
        f.write('deb {0} {1} main\n'.format(MIRROR, SUITE))
    apt = ['apt-get', '-q', '-y'] + slurm_apt_options()
    nspawn_run(base_rootfs, ['sh', '-c', ' '.join(apt) + ' update && ' + ' '.join(apt) +
                             ' install --download-only --no-install-recommends ' + ' '.join(slurm_packages())],
               rw_binds=[top + ':' + SLURM_APT], network=True, volatile=True)
    with open(os.path.join(top, 'complete'), 'w') as f:
        json.dump({'packages': sorted(os.listdir(os.path.join(top, 'archives'))),
                   'seconds': round(time.time() - t0)}, f, indent=1)
    log('Slurm packages downloaded in {0:.0f} s'.format(time.time() - t0))
    return key, top


def ensure_slurm_layer(flavour, role, layer_upper, base_rootfs, apt_key, apt_dir):
    """The Slurm packages of ``role`` ('head' or 'node') installed with apt over the flavour's OS layer, cached.
    Installing runs the packages' maintainer scripts as on a site (users, alternatives, enabled units); services are
    not started during the build (policy-rc.d), and munge's generated key is removed (the fleet has one key)."""
    key = hashlib.sha256(json.dumps([layer_upper, role, SLURM_PACKAGES[role], apt_key, SLURM_RECIPE]).encode(
        'utf-8')).hexdigest()[:16]
    top = os.path.join(CACHE_DIR, 'slurm-{0}-{1}-{2}'.format(flavour, role, key))
    upper = os.path.join(top, 'upper')
    if os.path.exists(os.path.join(top, 'complete')):
        return upper
    log('building the Slurm {0} layer for {1} ({2})'.format(role, flavour, top))
    t0 = time.time()
    merged = os.path.join(top, 'merged')
    umount(merged)
    for d in ('upper', 'work', 'merged'):
        shutil.rmtree(os.path.join(top, d), ignore_errors=True)
    mount_overlay([layer_upper, base_rootfs], upper, os.path.join(top, 'work'), merged)
    apt = ['apt-get', '-q', '-y'] + slurm_apt_options()
    script = ("set -e; printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; "
              "DEBIAN_FRONTEND=noninteractive {0} install --no-download --no-install-recommends {1}; "
              "rm -f /usr/sbin/policy-rc.d /etc/munge/munge.key; "
              "id slurm; id munge; test -x /usr/bin/sinfo").format(' '.join(apt), ' '.join(SLURM_PACKAGES[role]))
    try:
        proc = nspawn_run(merged, ['sh', '-c', script], rw_binds=[apt_dir + ':' + SLURM_APT], check=False)
        if proc.returncode != 0:
            raise TestbedError('cannot install {0} in the {1} layer: {2}'.format(
                ' '.join(SLURM_PACKAGES[role]), flavour, (proc.stdout + proc.stderr)[-2000:]))
    finally:
        umount(merged)
    shutil.rmtree(os.path.join(top, 'work'), ignore_errors=True)
    with open(os.path.join(top, 'complete'), 'w') as fh:
        fh.write('{0} {1:.0f}s\n'.format(key, time.time() - t0))
    log('Slurm {0} layer for {1} ready in {2:.0f} s'.format(role, flavour, time.time() - t0))
    return upper


def slurm_version():
    """TESTBED_SLURM_VERSION (default 24.11), checked against SLURM_VERSIONS."""
    version = os.environ.get('TESTBED_SLURM_VERSION') or SLURM_DEFAULT_VERSION
    if version not in SLURM_VERSIONS:
        raise TestbedError('TESTBED_SLURM_VERSION={0!r} is not known; allowed: {1}'.format(
            version, ', '.join(sorted(SLURM_VERSIONS))))
    return version


def dpkg_versions(root, packages):
    """{package: version} of the installed ``packages`` in the dpkg database of ``root``."""
    out = {}
    with open(os.path.join(root, 'var/lib/dpkg/status')) as f:
        for block in f.read().split('\n\n'):
            fields = dict(line.split(': ', 1) for line in block.splitlines() if ': ' in line and not line[0].isspace())
            if fields.get('Package') in packages and 'installed' in fields.get('Status', ''):
                out[fields['Package']] = fields.get('Version')
    return out


def ensure_slurm_root(version):
    """Debian's Slurm packages of ``version`` (SLURM_VERSIONS) in a root of their own, made once by debootstrap
    (minbase) and cached as an overlay layer whose only content is that root at SLURM_VERSIONS[version]['root'].
    Installing runs the packages' maintainer scripts as on a Debian 13 host (users, directories, units); nothing is
    started (debootstrap starts no service) and munge's generated key is removed (the fleet has one key)."""
    v = SLURM_VERSIONS[version]
    key = hashlib.sha256(json.dumps([v['suite'], MIRROR, SLURM_ROOT_PACKAGES, v['root'], SLURM_ROOT_RECIPE]).encode(
        'utf-8')).hexdigest()[:16]
    top = os.path.join(CACHE_DIR, 'slurm-root-{0}-{1}'.format(version, key))
    upper = os.path.join(top, 'upper')
    if os.path.exists(os.path.join(top, 'complete')):
        return key, upper
    log('building the Slurm {0} root (debootstrap {1} with {2}, cached in {3}); this takes a minute or two'.format(
        version, v['suite'], ', '.join(SLURM_ROOT_PACKAGES), top))
    t0 = time.time()
    shutil.rmtree(top, ignore_errors=True)
    tmp = os.path.join(top, 'upper.tmp')
    root = tmp + v['root']
    os.makedirs(os.path.dirname(root))
    run(['debootstrap', '--variant=minbase', '--include=' + ','.join(SLURM_ROOT_PACKAGES), v['suite'], root, MIRROR])
    for rel in ('etc/munge/munge.key',):
        if os.path.exists(os.path.join(root, rel)):
            os.unlink(os.path.join(root, rel))
    shutil.rmtree(os.path.join(root, 'var/cache/apt/archives'), ignore_errors=True)
    os.makedirs(os.path.join(root, 'var/cache/apt/archives/partial'))
    # Mount points of the node's own paths (testbed-slurm-root.service binds them at boot).
    for rel in SLURM_ROOT_DIRS:
        os.makedirs(os.path.join(root, rel), exist_ok=True)
    for rel in SLURM_ROOT_FILES:
        path = os.path.join(root, rel)
        if not os.path.lexists(path):
            open(path, 'a').close()
    versions = dpkg_versions(root, SLURM_ROOT_PACKAGES + ['libc6', 'libmunge2'])
    os.rename(tmp, upper)
    with open(os.path.join(top, 'complete'), 'w') as f:
        json.dump({'suite': v['suite'], 'root': v['root'], 'versions': versions,
                   'seconds': round(time.time() - t0)}, f, indent=1, sort_keys=True)
    log('Slurm {0} root ready in {1:.0f} s: {2}'.format(version, time.time() - t0, ', '.join(
        '{0} {1}'.format(k, versions[k]) for k in sorted(versions))))
    return key, upper


def slurm_root_files(version, role, root):
    """{path in the node: (text, mode)} that make the node run Debian's Slurm of ``version`` from its root
    (``root``: the path of that root on the host, to read its unit files and package lists): the units as packaged
    plus a drop-in each (RootDirectory=), the boot-time binds, and a wrapper per client command and daemon."""
    rdir = SLURM_VERSIONS[version]['root']
    daemon = 'slurmctld' if role == 'head' else 'slurmd'
    files = {}
    units = ['munge.service', daemon + '.service']
    for unit in units:
        with open(os.path.join(root, 'usr/lib/systemd/system', unit)) as f:
            files['usr/lib/systemd/system/' + unit] = (f.read(), 0o644)
        # slurmd runs RebootProgram (/usr/sbin/reboot, systemctl) in the root: systemctl refuses to act from a chroot
        # ("Running in chroot, ignoring request.") unless SYSTEMD_IGNORE_CHROOT=1 (systemd's docs/ENVIRONMENT.md).
        env = 'Environment=SYSTEMD_IGNORE_CHROOT=1\n' if unit == 'slurmd.service' else ''
        files['etc/systemd/system/{0}.d/testbed-slurm-root.conf'.format(unit)] = (
            '# testbed: {0} of Debian {1} runs from its root {2} (tests/testbed/REALITY.md, "Slurm").\n'
            '[Unit]\nRequires=testbed-slurm-root.service\nAfter=testbed-slurm-root.service\n'
            '[Service]\nRootDirectory={2}\nMountAPIVFS=no\n{3}'.format(
                unit, SLURM_VERSIONS[version]['debian'], rdir, env), 0o644)
    files['etc/systemd/system/testbed-slurm-root.service'] = (
        '# testbed: the node\'s own paths seen in the root of Debian {0}\'s Slurm (tests/testbed/REALITY.md).\n'
        '[Unit]\nDescription=testbed: bind the node\'s paths into {1}\nDefaultDependencies=no\n'
        'After=local-fs.target\nBefore=munge.service slurmd.service slurmctld.service\n'
        '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/lib/testbed/slurm-root-binds\n'
        '[Install]\nWantedBy=multi-user.target\n'.format(SLURM_VERSIONS[version]['debian'], rdir), 0o644)
    files['usr/local/lib/testbed/slurm-root-binds'] = (
        '#!/bin/sh\n# testbed: bind the node\'s own paths into {0} (rslave: mounts made later in the node, such as\n'
        '# /run/user/0, show there too). Written by tests/testbed/testbed.py up --slurm.\nset -e\nR={0}\n'
        'for d in {1}; do\n  mountpoint -q "$R/$d" && continue\n  mount --rbind "/$d" "$R/$d"\n'
        '  mount --make-rslave "$R/$d"\ndone\n'
        'for f in {2}; do\n  [ -e "/$f" ] || continue\n  mountpoint -q "$R/$f" && continue\n'
        '  mount --bind "/$f" "$R/$f"\ndone\n'.format(rdir, ' '.join(SLURM_ROOT_DIRS), ' '.join(SLURM_ROOT_FILES)),
        0o755)
    commands = []
    for package in ('slurm-client', 'munge'):
        with open(os.path.join(root, 'var/lib/dpkg/info/{0}.list'.format(package))) as f:
            commands.extend(line.strip()[1:] for line in f if line.startswith('/usr/bin/') and line.strip() != '/usr/bin')
    commands.append('usr/sbin/' + daemon)
    for rel in sorted(set(commands)):
        # Run in the root, in the same directory when the root has it (/root, /home, /tmp are the node's own).
        files[rel] = ('#!/bin/sh\n# testbed: Debian {0}\'s /{1} (Slurm {2}), run in its root {3} '
                      '(tests/testbed/REALITY.md, "Slurm").\n'
                      'exec /usr/sbin/chroot {3} /bin/sh -c \'cd "$0" 2>/dev/null || cd /; exec "$@"\' "$PWD" '
                      '/{1} "$@"\n'.format(SLURM_VERSIONS[version]['debian'], rel, version, rdir), 0o755)
    return files


def ensure_slurm_root_layer(version, flavour, role, layer_upper, root_key, root_upper, base_rootfs):
    """The node's side of Debian's Slurm of ``version`` run from its root, for ``role`` ('head' or 'node') over the
    flavour's OS layer, cached: the users munge and slurm (uid 64030, as Debian's packages make it) and their
    directories in the node, and slurm_root_files()."""
    rdir = SLURM_VERSIONS[version]['root']
    key = hashlib.sha256(json.dumps([layer_upper, role, version, root_key, SLURM_ROOT_LAYER_RECIPE]).encode(
        'utf-8')).hexdigest()[:16]
    top = os.path.join(CACHE_DIR, 'slurm-{0}-{1}-{2}-{3}'.format(version, flavour, role, key))
    upper = os.path.join(top, 'upper')
    if os.path.exists(os.path.join(top, 'complete')):
        return upper
    log('building the Slurm {0} {1} layer for {2} ({3})'.format(version, role, flavour, top))
    t0 = time.time()
    merged = os.path.join(top, 'merged')
    umount(merged)
    for d in ('upper', 'work', 'merged'):
        shutil.rmtree(os.path.join(top, d), ignore_errors=True)
    mount_overlay([root_upper, layer_upper, base_rootfs], upper, os.path.join(top, 'work'), merged)
    script = ('set -e; adduser --quiet --system --group --no-create-home --home /nonexistent munge; '
              'adduser --quiet --system --group --uid 64030 --no-create-home --home /nonexistent slurm; '
              'install -d -m 0755 /etc/slurm; install -d -m 0700 -o munge -g munge /etc/munge /var/log/munge; '
              'install -d -m 0711 -o munge -g munge /var/lib/munge; '
              'install -d -m 0755 -o slurm -g slurm /var/lib/slurm /var/lib/slurm/slurmd /var/lib/slurm/slurmctld '
              '/var/log/slurm; id slurm; id munge')
    try:
        proc = nspawn_run(merged, ['sh', '-c', script], check=False)
        if proc.returncode != 0:
            raise TestbedError('cannot make the Slurm users and directories in the {0} layer: {1}'.format(
                flavour, (proc.stdout + proc.stderr)[-2000:]))
        for rel, (text, mode) in sorted(slurm_root_files(version, role, merged + rdir).items()):
            path = os.path.join(merged, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if os.path.lexists(path):
                os.unlink(path)
            with open(path, 'w') as f:
                f.write(text)
            os.chmod(path, mode)
        daemon = 'slurmctld' if role == 'head' else 'slurmd'
        wants = os.path.join(merged, 'etc/systemd/system/multi-user.target.wants')
        os.makedirs(wants, exist_ok=True)
        for unit in ('testbed-slurm-root.service', 'munge.service', daemon + '.service'):
            link = os.path.join(wants, unit)
            if not os.path.lexists(link):
                target = ('/etc/systemd/system/' if unit.startswith('testbed-') else '/usr/lib/systemd/system/') + unit
                os.symlink(target, link)
    finally:
        umount(merged)
    shutil.rmtree(os.path.join(top, 'work'), ignore_errors=True)
    with open(os.path.join(top, 'complete'), 'w') as fh:
        fh.write('{0} {1:.0f}s\n'.format(key, time.time() - t0))
    log('Slurm {0} {1} layer for {2} ready in {3:.0f} s'.format(version, role, flavour, time.time() - t0))
    return upper


def ensure_repos():
    """Build the local repositories (build.py itself skips the work when its inputs are unchanged)."""
    if os.environ.get('TESTBED_SKIP_REPOS'):
        os.makedirs(repos_dir(), exist_ok=True)
        log('TESTBED_SKIP_REPOS is set: using {0} as it is'.format(repos_dir()))
        return
    if not os.path.exists(REPOS_BUILD):
        os.makedirs(repos_dir(), exist_ok=True)
        log('WARNING: {0} does not exist; nodes get an empty /srv/testbed-repos'.format(REPOS_BUILD))
        return
    before = os.stat(repos_dir()).st_ino if os.path.isdir(repos_dir()) else None
    log('building the local repositories ({0} --out {1})'.format(REPOS_BUILD, repos_dir()))
    proc = run([sys.executable, REPOS_BUILD, '--out', repos_dir()], check=False,
               stdout=None, stderr=None)
    if proc.returncode != 0:
        raise TestbedError('{0} --out {1} failed with exit status {2} (TESTBED_SKIP_REPOS=1 skips it)'.format(
            REPOS_BUILD, repos_dir(), proc.returncode))
    return before is not None and os.stat(repos_dir()).st_ino != before


def ensure_ssh_key():
    key = state_path('ssh', 'id_ed25519')
    if not os.path.exists(key):
        os.makedirs(os.path.dirname(key), mode=0o700, exist_ok=True)
        run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'nodeprep-testbed', '-f', key])
    with open(key + '.pub') as f:
        return key, f.read()


# --------------------------------------------------------------------------- processes

def pids():
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            yield int(entry)


def cmdline(pid):
    try:
        with open('/proc/{0}/cmdline'.format(pid), 'rb') as f:
            return [a.decode('utf-8', 'replace') for a in f.read().split(b'\0') if a]
    except (IOError, OSError):
        return []


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    try:
        with open('/proc/{0}/stat'.format(pid)) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (IOError, OSError, IndexError):
        return False


def read_pid(path):
    try:
        with open(path) as f:
            pid = int(f.read().strip())
    except (IOError, OSError, ValueError):
        return None
    return pid if alive(pid) else None


def nspawn_pids(name):
    """systemd-nspawn processes of node `name` started from this state dir."""
    found = []
    for pid in pids():
        argv = cmdline(pid)
        if not argv or not os.path.basename(argv[0]).startswith('systemd-nspawn'):
            continue
        if ('-M' in argv and argv[argv.index('-M') + 1:argv.index('-M') + 2] == [machine_name(name)]) \
                and any(a.startswith(STATE_DIR) for a in argv):
            found.append(pid)
    return found


def netns_inode(netns):
    try:
        return os.stat('/run/netns/' + netns).st_ino
    except OSError:
        return None


def pids_in_netns(netns):
    ino = netns_inode(netns)
    if ino is None:
        return []
    out = []
    for pid in pids():
        try:
            if os.stat('/proc/{0}/ns/net'.format(pid)).st_ino == ino:
                out.append(pid)
        except OSError:
            pass
    return out


def container_pid1(name):
    """PID (host view) of the node's init, or None."""
    for pid in nspawn_pids(name):
        try:
            children = open('/proc/{0}/task/{0}/children'.format(pid)).read().split()
        except (IOError, OSError):
            children = []
        for c in children:
            if os.path.basename((cmdline(int(c)) or [''])[0]) in ('systemd', 'init'):
                return int(c)
            return int(c)
    return None


CAP_SYS_RESOURCE_BIT = 24


def node_memlock_kib(nodes):
    """The most locked memory (KiB) a service of these nodes can get, measured on a running node's init: None
    (unlimited) when it may raise a hard limit (CAP_SYS_RESOURCE in its bounding set) or its own is unlimited."""
    for node in nodes:
        pid = container_pid1(node['name'])
        if not pid:
            continue
        with open('/proc/{0}/status'.format(pid)) as f:
            caps = [line.split()[1] for line in f if line.startswith('CapBnd:')]
        if caps and int(caps[0], 16) & (1 << CAP_SYS_RESOURCE_BIT):
            return None
        with open('/proc/{0}/limits'.format(pid)) as f:
            hard = [line.split()[4] for line in f if line.startswith('Max locked memory')]
        return int(hard[0]) // 1024 if hard and hard[0].isdigit() else None
    return None


def node_exec(name, argv, check=True):
    pid1 = container_pid1(name)
    if pid1 is None:
        raise TestbedError('node {0} is not running'.format(name))
    return run(['nsenter', '-t', str(pid1), '-m', '-u', '-i', '-n', '-p', '--'] + list(argv), check=check)


# --------------------------------------------------------------------------- node lifecycle

def setup_network(node):
    ns, vh, vn = node['netns'], node['veth_host'], node['veth_node']
    if netns_inode(ns) is None:
        run(['ip', 'netns', 'add', ns])
    have_eth0 = run(['ip', 'netns', 'exec', ns, 'ip', 'link', 'show', 'eth0'], check=False).returncode == 0
    if not have_eth0:
        run(['ip', 'link', 'del', vh], check=False)
        run(['ip', 'link', 'add', vh, 'type', 'veth', 'peer', 'name', vn])
        run(['ip', 'link', 'set', vn, 'netns', ns])
        run(['ip', 'netns', 'exec', ns, 'ip', 'link', 'set', vn, 'name', 'eth0'])
    run(['ip', 'netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up'])
    run(['ip', 'netns', 'exec', ns, 'ip', 'addr', 'replace', node['node_ip'] + '/30', 'dev', 'eth0'])
    run(['ip', 'netns', 'exec', ns, 'ip', 'link', 'set', 'eth0', 'up'])
    run(['ip', 'addr', 'replace', node['host_ip'] + '/30', 'dev', vh])
    if node.get('slurm') or node.get('imex'):
        # Slurm's daemons talk node to node (slurmd -> slurmctld and back), and so do the IMEX daemons of a domain
        # (TCP 50000 and 50005): a route to the fleet's subnet through the host, which forwards between the fleet's
        # own veths only (forwarding is switched on per host veth).
        run(['ip', 'netns', 'exec', ns, 'ip', 'route', 'replace', '{0}.{1}.0.0/16'.format(*SUBNET),
             'via', node['host_ip']])
        with open('/proc/sys/net/ipv4/conf/{0}/forwarding'.format(vh), 'w') as f:
            f.write('1\n')
    if not os.path.exists(node_dir(node['name'], 'faults', 'node-down')):
        run(['ip', 'link', 'set', vh, 'up'])


def provision_node(node, layer_upper, base_rootfs, pubkey, slurm_lowers=(), slurm_root=None):
    """Mount the node's root (its overlay over ``slurm_lowers``, the OS layer and the base) and write its own files
    once. ``slurm_root``: where Debian's Slurm root is in the node (24.11), None when Slurm is the node's own."""
    name = node['name']
    nd = node_dir(name)
    merged = os.path.join(nd, 'root')
    for d in ('faults',):
        os.makedirs(os.path.join(nd, d), exist_ok=True)
    lowers = list(slurm_lowers) + [layer_upper, base_rootfs]
    mount_overlay(lowers, os.path.join(nd, 'upper'), os.path.join(nd, 'work'), merged)
    stamp = os.path.join(nd, 'provisioned')
    if os.path.exists(stamp):
        return merged
    with open(os.path.join(merged, 'etc/hostname'), 'w') as f:
        f.write(name + '\n')
    with open(os.path.join(merged, 'etc/hosts'), 'w') as f:
        f.write('127.0.0.1\tlocalhost\n{0}\t{1}\n::1\tlocalhost ip6-localhost ip6-loopback\n'.format(node['node_ip'], name))
    with open(os.path.join(merged, 'etc/machine-id'), 'w') as f:
        f.write(uuid.uuid4().hex + '\n')
    sshdir = os.path.join(merged, 'root/.ssh')
    os.makedirs(sshdir, mode=0o700, exist_ok=True)
    os.chmod(sshdir, 0o700)
    with open(os.path.join(sshdir, 'authorized_keys'), 'w') as f:
        f.write(pubkey)
    os.chmod(os.path.join(sshdir, 'authorized_keys'), 0o600)
    os.makedirs(os.path.join(merged, 'etc/testbed'), exist_ok=True)
    with open(os.path.join(merged, 'etc/testbed/node.json'), 'w') as f:
        json.dump({k: node[k] for k in ('name', 'flavour', 'gpu', 'profile', 'node_ip')}, f, indent=2, sort_keys=True)
    if node.get('slurm') == 'head':
        pass                          # the Slurm head has no GPU: no hardware profile, no GPU double
    elif node['profile_path']:
        shutil.copy2(node['profile_path'], os.path.join(merged, 'etc/testbed/hardware.json'))
        installer = os.path.join(DOUBLE_DIR, 'install_base.sh')
        if os.path.exists(installer):
            proc = run(['sh', installer, merged, node['profile_path']], check=False)
            if proc.returncode != 0:
                raise TestbedError('{0} {1} {2} failed (rc={3}): {4}'.format(
                    installer, merged, node['profile_path'], proc.returncode, (proc.stdout + proc.stderr)[-1500:]))
        else:
            log('WARNING: {0} does not exist; {1} has no GPU double'.format(installer, name))
    else:
        log('WARNING: no hardware profile {0} in {1}/profiles; {2} has no GPU double'.format(
            node['profile'], DOUBLE_DIR, name))
    if node.get('slurm') == 'node':
        # The node's hardware as slurmd sees it in the node (its NodeName line in slurm.conf is made from it).
        proc = nspawn_run(merged + (slurm_root or ''), ['slurmd', '-C'], check=False)
        try:
            slurmconf.parse_slurmd_c(proc.stdout)
        except ValueError as exc:
            raise TestbedError('slurmd -C on {0} (rc={1}): {2}; {3}'.format(name, proc.returncode, exc, proc.stderr[-500:]))
        with open(os.path.join(nd, 'slurmd-C.txt'), 'w') as f:
            f.write(proc.stdout)
    with open(stamp, 'w') as f:
        f.write(time.strftime('%Y-%m-%dT%H:%M:%SZ\n', time.gmtime()))
    return merged


def slurm_cluster_name():
    return 'testbed' if PREFIX == 'nptb' else PREFIX.lower()


def slurm_files(nodes):
    """{path in the node: (text, mode)} shared by every node of the Slurm fleet."""
    head = [n for n in nodes if n.get('slurm') == 'head'][0]
    compute = []
    for n in nodes:
        if n.get('slurm') != 'node':
            continue
        with open(node_dir(n['name'], 'slurmd-C.txt')) as f:
            hardware = slurmconf.parse_slurmd_c(f.read())
        compute.append({'name': n['name'], 'addr': n['node_ip'], 'hardware': hardware})
    hosts = '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' + ''.join(
        '{0}\t{1}\n'.format(n['node_ip'], n['name']) for n in sorted(nodes, key=lambda n: n['index']))
    rts = int(os.environ.get('TESTBED_SLURM_RETURN_TO_SERVICE') or 1)
    return {
        'etc/slurm/slurm.conf': (slurmconf.slurm_conf(slurm_cluster_name(), {'name': head['name'], 'addr': head['node_ip']},
                                                      compute, return_to_service=rts), 0o644),
        'etc/slurm/cgroup.conf': (slurmconf.cgroup_conf(), 0o644),
        'etc/hosts': (hosts, 0o644),
    }


def passwd_ids(root, user):
    with open(os.path.join(root, 'etc/passwd')) as f:
        for line in f:
            parts = line.split(':')
            if parts[0] == user:
                return int(parts[2]), int(parts[3])
    raise TestbedError('no user {0} in {1}/etc/passwd'.format(user, root))


def configure_slurm(nodes):
    """Write the fleet's Slurm files and its one munge key into every node (before it boots, or restart its daemon
    when a file changed under a running node). Returns the nodes whose daemons were restarted."""
    keyfile = state_path('slurm', 'munge.key')
    if not os.path.exists(keyfile):
        os.makedirs(os.path.dirname(keyfile), mode=0o700, exist_ok=True)
        with open(keyfile + '.tmp', 'wb') as f:
            f.write(os.urandom(1024))          # 1024 random bytes; munged checks the key's owner and mode
        os.chmod(keyfile + '.tmp', 0o400)
        os.rename(keyfile + '.tmp', keyfile)
    with open(keyfile, 'rb') as f:
        key = f.read()
    files = slurm_files(nodes)
    restarted = []
    for n in nodes:
        if not n.get('slurm'):
            continue
        root = node_dir(n['name'], 'root')
        changed = False
        for rel, (text, mode) in sorted(files.items()):
            path = os.path.join(root, rel)
            try:
                with open(path) as f:
                    same = f.read() == text
            except (IOError, OSError):
                same = False
            if not same:
                changed = changed or rel.startswith('etc/slurm/')
                with open(path + '.tmp', 'w') as f:
                    f.write(text)
                os.chmod(path + '.tmp', mode)
                os.rename(path + '.tmp', path)
        path = os.path.join(root, 'etc/munge/munge.key')
        if not os.path.exists(path) or open(path, 'rb').read() != key:
            uid, gid = passwd_ids(root, 'munge')
            with open(path + '.tmp', 'wb') as f:
                f.write(key)
            os.chown(path + '.tmp', uid, gid)
            os.chmod(path + '.tmp', 0o400)
            os.rename(path + '.tmp', path)
            changed = True
        if changed and container_pid1(n['name']):
            units = ['munge', 'slurmctld' if n['slurm'] == 'head' else 'slurmd']
            node_exec(n['name'], ['systemctl', 'restart'] + units, check=False)
            restarted.append(n['name'])
    return restarted


def nspawn_argv(node):
    nd = node_dir(node['name'])
    return ['systemd-nspawn', '--quiet', '--register=no', '--keep-unit', '--boot',
            '-D', os.path.join(nd, 'root'), '-M', machine_name(node['name']), '--hostname=' + node['name'],
            '--network-namespace-path=/run/netns/' + node['netns'],
            '--bind-ro=' + repos_dir() + ':/srv/testbed-repos',
            '--bind=' + os.path.join(nd, 'faults') + ':/var/lib/testbed/faults',
            '--capability=' + ','.join(NODE_CAPABILITIES),
            '--console=read-only']


# --------------------------------------------------------------------------- per-node cgroups
# systemd-nspawn --keep-unit places the container under the cgroup its caller is in (subgroups payload/ and
# supervisor/). Started from one cgroup, every node's systemd would manage the same system.slice/<unit> cgroups: one
# node stopping a service removes the cgroup another node is starting the same service in (exit 219/CGROUP), and a
# unit's "cgroup empty" reflects every node's processes. A real node has its own cgroup tree, so each node's runner
# moves itself into a cgroup of its own, in every hierarchy systemd uses (name=systemd and the unified one).

def cgroup_hierarchies(mountinfo, own_cgroups):
    """(mount point, cgroup of this process) for the hierarchies systemd uses: name=systemd (v1) and cgroup2.

    ``mountinfo`` and ``own_cgroups`` are the texts of /proc/self/mountinfo and /proc/self/cgroup.
    """
    mounts = {}
    for line in mountinfo.splitlines():
        pre, dummy, post = line.partition(' - ')
        fields, tail = pre.split(), post.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == 'cgroup2':
            mounts.setdefault('', fields[4])
        elif tail[0] == 'cgroup' and 'name=systemd' in tail[2].split(','):
            mounts.setdefault('name=systemd', fields[4])
    found = []
    for line in own_cgroups.splitlines():
        parts = line.split(':', 2)
        if len(parts) == 3 and parts[1] in mounts:
            own = parts[2].split('/testbed-')[0].rstrip('/')   # never nest under another node's cgroup
            found.append((mounts[parts[1]], own))
    return found


def _read(path):
    with open(path) as f:
        return f.read()


def node_cgroups(name):
    return [os.path.join(mnt + own, 'testbed-' + PREFIX, name) for mnt, own in cgroup_hierarchies(
        _read('/proc/self/mountinfo'), _read('/proc/self/cgroup'))]


def join_node_cgroup(name):
    """Move this process (the node's runner) into the node's own cgroups; nspawn then nests the node under them."""
    for d in node_cgroups(name):
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, 'cgroup.procs'), 'w') as f:
                f.write(str(os.getpid()))
        except OSError as exc:
            log('WARNING: {0} has no cgroup of its own ({1}: {2}); its services share cgroups with other '
                'nodes'.format(name, d, exc))


def node_freeze_file(name):
    """The cgroup v2 freezer of node ``name`` (cgroup.freeze of its cgroup in the unified hierarchy), or None."""
    for d in node_cgroups(name):
        path = os.path.join(d, 'cgroup.freeze')
        if os.path.exists(path):
            return path
    return None


def set_frozen(name, frozen, timeout=10):
    """Freeze (or thaw) every process of node ``name``; wait until the kernel says it is done (cgroup.events)."""
    path = node_freeze_file(name)
    if path is None:
        raise TestbedError('node {0} has no cgroup v2 freezer (cgroup.freeze under the unified hierarchy)'.format(name))
    with open(path, 'w') as f:
        f.write('1\n' if frozen else '0\n')
    events = os.path.join(os.path.dirname(path), 'cgroup.events')
    deadline = time.time() + timeout
    while os.path.exists(events) and time.time() < deadline:
        if ('frozen 1' in _read(events)) == bool(frozen):
            return
        time.sleep(0.1)
    if os.path.exists(events):
        raise TestbedError('node {0}: cgroup.events does not say frozen {1} after {2} s'.format(
            name, int(bool(frozen)), timeout))


def thaw_if_frozen(name):
    path = node_freeze_file(name)
    if path is not None and _read(path).strip() == '1':
        set_frozen(name, False)


def remove_node_cgroups(name):
    for d in node_cgroups(name):
        for top, dirs, dummy in os.walk(d, topdown=False):
            try:
                os.rmdir(top)
            except OSError:
                pass
        try:
            os.rmdir(os.path.dirname(d))   # testbed-<prefix>, once no node is left in it
        except OSError:
            pass


CLONE_NEWTIME = 0x80
# Seconds a Slurm fleet's node stays off between its shutdown and its next boot. slurmctld compares whole seconds
# (boot_time = now - uptime rounded up) with the time `scontrol reboot` was asked for, and keeps a node that seems to
# have booted before that "still waiting for boot" (REALITY.md, Slurm); a real node's firmware takes minutes.
SLURM_POWER_CYCLE_S = 2


def enter_boot_time_namespace():
    """Give the process about to exec (the node's systemd-nspawn) a time namespace of its own whose CLOCK_BOOTTIME
    and CLOCK_MONOTONIC start near 0, as after a real boot: the node's uptime (sysinfo, /proc/uptime) and /proc/stat
    btime then change at every reboot, which is what slurmd reports and slurmctld compares (REALITY.md, Slurm).
    Linux >= 5.6; a process moves into the time namespace made by unshare() when it calls execve()."""
    libc = ctypes.CDLL(None, use_errno=True)
    # Exact offsets (seconds rounded down, nanoseconds in [0, 1e9) as the kernel wants them): the node's clocks start
    # at 0 and not at the fraction of a second the host's clocks had.
    boot_s, boot_ns = divmod(-time.clock_gettime_ns(time.CLOCK_BOOTTIME), 10 ** 9)
    mono_s, mono_ns = divmod(-time.clock_gettime_ns(time.CLOCK_MONOTONIC), 10 ** 9)
    if libc.unshare(CLONE_NEWTIME) != 0:
        err = ctypes.get_errno()
        raise OSError(err, 'unshare(CLONE_NEWTIME): ' + os.strerror(err))
    with open('/proc/self/timens_offsets', 'w') as f:
        f.write('monotonic {0} {1}\nboottime {2} {3}\n'.format(mono_s, mono_ns, boot_s, boot_ns))


def power_cycle_seconds(name, node):
    """Seconds the node stays off between its shutdown and its next boot: the slow-boot fault's value when it is
    set, else SLURM_POWER_CYCLE_S on a Slurm fleet's node, else 0."""
    try:
        with open(node_dir(name, 'faults', FAULTS['slow-boot']['flag'])) as f:
            value = f.read().strip()
        if value.isdigit():
            return int(value)
    except (IOError, OSError):
        pass
    return SLURM_POWER_CYCLE_S if node.get('slurm') else 0


def start_node(node):
    name = node['name']
    if read_pid(node_dir(name, 'runner.pid')) or nspawn_pids(name):
        return False
    for stale in ('stop', 'runner.pid'):
        try:
            os.unlink(node_dir(name, stale))
        except OSError:
            pass
    console = open(node_dir(name, 'console.log'), 'ab')
    runner = subprocess.Popen([sys.executable, os.path.abspath(__file__), '_run', name],
                              stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                              start_new_session=True, close_fds=True, env=dict(os.environ, TESTBED_DIR=STATE_DIR))
    console.close()
    with open(node_dir(name, 'runner.pid'), 'w') as f:
        f.write(str(runner.pid))
    return True


def cmd_run(args):
    """The per-node runner: boots the node again whenever it reboots (nspawn exits 133)."""
    name = args.node
    node = load_state()['nodes'][name]
    with open(node_dir(name, 'runner.pid'), 'w') as f:
        f.write(str(os.getpid()))
    join_node_cgroup(name)
    child = {'proc': None}

    def on_term(signum, frame):
        with open(node_dir(name, 'stop'), 'w') as fh:
            fh.write('stop\n')
        if child['proc'] is not None and child['proc'].poll() is None:
            child['proc'].send_signal(signal.SIGTERM)   # nspawn powers the node off

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    boots = 0
    while not os.path.exists(node_dir(name, 'stop')):
        boots += 1
        with open(node_dir(name, 'boots.log'), 'a') as f:
            f.write('{0} boot {1}\n'.format(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), boots))
        child['proc'] = subprocess.Popen(nspawn_argv(node), stdin=subprocess.DEVNULL,
                                         preexec_fn=enter_boot_time_namespace if node.get('slurm') else None)
        rc = child['proc'].wait()
        with open(node_dir(name, 'boots.log'), 'a') as f:
            f.write('{0} exit {1}\n'.format(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), rc))
        if rc != NSPAWN_REBOOT_RC:
            break
        off = power_cycle_seconds(name, node)
        if off:
            with open(node_dir(name, 'boots.log'), 'a') as f:
                f.write('{0} off {1} s\n'.format(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), off))
            deadline = time.time() + off
            while time.time() < deadline and not os.path.exists(node_dir(name, 'stop')):
                time.sleep(min(1.0, max(0.0, deadline - time.time())))
    try:
        os.unlink(node_dir(name, 'runner.pid'))
    except OSError:
        pass
    return 0


def wait_ssh(nodes, timeout):
    deadline = time.time() + timeout
    pending = {n['name']: n for n in nodes}
    while pending and time.time() < deadline:
        for name, node in list(pending.items()):
            try:
                s = socket.create_connection((node['node_ip'], 22), timeout=1)
                s.settimeout(2)
                banner = s.recv(64)
                s.close()
                if banner.startswith(b'SSH-'):
                    del pending[name]
            except (OSError, socket.timeout):
                pass
            if name in pending and not read_pid(node_dir(name, 'runner.pid')) and not nspawn_pids(name):
                raise TestbedError('node {0} stopped while booting; see {1}'.format(name, node_dir(name, 'console.log')))
        if pending:
            time.sleep(0.5)
    if pending:
        raise TestbedError('no SSH from {0} after {1} s; see {2}/nodes/<name>/console.log'.format(
            ', '.join(sorted(pending)), timeout, STATE_DIR))


def stop_nodes(names, grace=20):
    """Power nodes off (SIGTERM to the runner, which forwards it to nspawn), then kill what is left."""
    for name in names:
        thaw_if_frozen(name)   # a frozen node (fault ssh-hang) takes no signal
    for name in names:
        if os.path.isdir(node_dir(name)):
            with open(node_dir(name, 'stop'), 'w') as f:
                f.write('stop\n')
        runner = read_pid(node_dir(name, 'runner.pid'))
        targets = ([runner] if runner else []) + nspawn_pids(name)
        for pid in targets:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
    deadline = time.time() + grace
    while time.time() < deadline:
        if not any(nspawn_pids(n) or read_pid(node_dir(n, 'runner.pid')) for n in names):
            break
        time.sleep(0.3)
    for name in names:
        runner = read_pid(node_dir(name, 'runner.pid'))
        leftovers = ([runner] if runner else []) + nspawn_pids(name) + pids_in_netns('{0}-{1}'.format(PREFIX, name))
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.2 if names else 0)


# --------------------------------------------------------------------------- inventory

def yaml_dump(obj, indent=0):
    pad = '  ' * indent
    lines = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict) and v:
                lines.append('{0}{1}:'.format(pad, k))
                lines.extend(yaml_dump(v, indent + 1))
            elif isinstance(v, dict):
                lines.append('{0}{1}: {{}}'.format(pad, k))
            else:
                lines.append('{0}{1}: {2}'.format(pad, k, json.dumps(v)))
    return lines


# Locked GPU clocks per GPU model (MHz), within the supported graphics clocks of each profile's capture.
ARTICLE_LOCKED_CLOCKS = {
    'b200': {'min': 1500, 'max': 1965},
    'h100': {'min': 1500, 'max': 1980},
    'h200': {'min': 1500, 'max': 1980},
}
ARTICLE_LOCKED_CLOCKS['gb200'] = {'min': 1500, 'max': 2062}
# GPUs per node where a kind has fewer than the fleet-wide nodeprep_expected_gpus (8): a group variable of gpu_<model>.
# The nvbandwidth figures a site sets where no public one exists (rules/_fitness_thresholds.py has none for B200): the
# fleet's own acceptance values, as an operator would take them from runs on healthy nodes (the GPU double's B200
# profile measures about 55 GB/s host<->device and 740 GB/s device-to-device read); H100 and H200 use the table's.
SITE_PERF_THRESHOLDS = {'b200': {'host_to_device_gbps': 48, 'device_to_host_gbps': 48, 'device_to_device_read_gbps': 600}}
EXPECTED_GPUS = {'gb200': 4}


def write_inventory(nodes, keyfile, memlock_kib=None):
    el_vars = {}
    for flavour, f in FLAVOURS.items():
        if f['pkg'] == 'rpm':
            base = 'file:///srv/testbed-repos/el{0}/'.format(f['major'])
            el_vars[flavour] = {
                # CUDA key: the role's default <repo_url>D42D0685.pub (EL8/9) or CDF6BA43.pub (EL10) is served there
                'nodeprep_nvidia_driver_repo_url': base + 'cuda/',
                'nodeprep_nvidia_driver_epel_url': base + 'epel/',
                'nodeprep_nvidia_driver_epel_gpgkey': base + 'epel/RPM-GPG-KEY-EPEL-{0}'.format(f['major']),
                'nodeprep_kernel_elrepo_url': base + 'elrepo/',
                # both ELRepo key files; the role lists only the v2 key on EL10 (REALITY.md, R6)
                'nodeprep_kernel_elrepo_gpgkey': [base + 'elrepo/RPM-GPG-KEY-elrepo.org',
                                                  base + 'elrepo/RPM-GPG-KEY-v2-elrepo.org'],
            }
        else:
            el_vars[flavour] = {'nodeprep_nvidia_driver_repo_url': 'file:///srv/testbed-repos/apt/cuda/'}
    inv = {'all': {'vars': {
        'ansible_user': 'root',
        'ansible_ssh_private_key_file': keyfile,
        # ServerAlive: a node that goes down mid-run (fault node-down) is given up after ~15 s instead of hanging on
        # the persisted ssh master connection until TCP gives up.
        'ansible_ssh_common_args': '-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR '
                                   '-o ServerAliveInterval=5 -o ServerAliveCountMax=3',
        'ansible_python_interpreter': '/usr/bin/python3',
        'nodeprep_reboot_ok': True,
        'nodeprep_boot_time_command': "awk '{print $22}' /proc/1/stat",
        'nodeprep_expected_gpus': 8,
        # The simulated nodes have the host's RAM (24 GiB here) but 8 simulated GPUs with 640 GiB or more; half of
        # that for /dev/shm exceeds RAM, which a real 8-GPU node (1-2 TiB of RAM) never does. tmpfs accepts it.
        'nodeprep_shm_allow_oversize': True,
    }, 'children': {}}}
    # What the article's checklist asks for, set the way an operator following it would (so the demo, molecule and
    # the bench exercise every readiness check): a power cap as a percentage (72.5 %: 507.5 W on the 700 W Hopper
    # boards, the rounding rule's half-way case), NCCL settings NCCL reads, the NCCL interface chosen by network, and
    # its receive offloads off. Locked clocks per GPU model are set on the gpu_* groups below.
    net = '{0}.{1}.0.0/16'.format(SUBNET[0], SUBNET[1])
    inv['all']['vars'].update({
        'nodeprep_gpu_settings_power_limit': '72.5%',
        'nodeprep_nccl_conf': {'NCCL_SHM_DISABLE': 0, 'NCCL_IB_TIMEOUT': 22, 'NCCL_DEBUG': 'WARN'},
        'nodeprep_nccl_socket_networks': [net],
        'nodeprep_nic_offload_features': {'gro': False, 'lro': False},
        'nodeprep_nic_offload_networks': [net],
        'nodeprep_nic_offload_ignore_fixed': True,
        # The GPUDirect RDMA path and DCGM (issue 19), on as a site with ConnectX rails would have them, so that
        # readiness's rdma.*, pci.acs, kernel.iommu and gpu.dcgm_diag checks are exercised too (none skips).
        'nodeprep_rdma_peermem': True,
        'nodeprep_rdma_acs_unit': True,
        'nodeprep_kernel_iommu_passthrough': True,
        'nodeprep_dcgm_install': True,
        'nodeprep_readiness_dcgm': True,
        # The performance tools built from the fleet's release tarballs and the performance gates on (issue 28), so
        # that perf.tools, perf.allreduce and perf.nvbandwidth are exercised too. A fleet without Slurm has no
        # scheduler to ask: the operator says its nodes run no job; on a Slurm fleet Slurm decides instead.
        'nodeprep_perf_tools_install': True,
        'nodeprep_perf_tools_nccl_tests_url': 'file:///srv/testbed-repos/src/nccl-tests-{version}.tar.gz',
        'nodeprep_perf_tools_nvbandwidth_url': 'file:///srv/testbed-repos/src/nvbandwidth-{version}.tar.gz',
        'nodeprep_readiness_performance': True,
        'nodeprep_readiness_node_idle': True,
    })
    children = inv['all']['children']
    for family in ('redhat', 'debian'):
        fam = {'children': {}}
        for flavour in FLAVOURS:
            if FLAVOURS[flavour]['family'] != family:
                continue
            hosts = {}
            for n in nodes:
                if n['flavour'] == flavour and n.get('slurm') != 'head':
                    hosts[n['name']] = {'ansible_host': n['node_ip'], 'testbed_profile': n['profile'],
                                        'nodeprep_nvidia_driver_branch': n.get('branch', '580')}
            if hosts:
                fam['children'][flavour] = {'hosts': hosts, 'vars': el_vars[flavour]}
        if fam['children']:
            children[family] = fam
    for gpu in sorted(set(n['gpu'] for n in nodes if n['gpu'])):
        children['gpu_' + gpu] = {'hosts': {n['name']: {} for n in nodes if n['gpu'] == gpu}}
        if gpu in ARTICLE_LOCKED_CLOCKS:
            children['gpu_' + gpu]['vars'] = {'nodeprep_gpu_settings_locked_gpu_clocks': ARTICLE_LOCKED_CLOCKS[gpu]}
        if gpu in EXPECTED_GPUS:
            children['gpu_' + gpu].setdefault('vars', {})['nodeprep_expected_gpus'] = EXPECTED_GPUS[gpu]
        if gpu in SITE_PERF_THRESHOLDS:
            children['gpu_' + gpu].setdefault('vars', {})['nodeprep_readiness_performance_thresholds'] = \
                dict(SITE_PERF_THRESHOLDS[gpu])
    domain = [n['name'] for n in nodes if n.get('imex') == IMEX_GROUP]
    if domain:
        # One NVLink domain: the imex role writes its node list from this group (the addresses: ansible_host).
        children[IMEX_GROUP] = {'hosts': dict((name, {}) for name in domain),
                                'vars': {'nodeprep_imex_domain_group': IMEX_GROUP, 'nodeprep_nvidia_driver_imex': True}}
    if any(n.get('slurm') for n in nodes):
        # The head node: no GPU, so in none of the groups above (the OS and GPU groups hold GPU nodes only).
        children['slurm_head'] = {'hosts': {n['name']: {'ansible_host': n['node_ip']}
                                            for n in nodes if n.get('slurm') == 'head'}}
        children['slurm_nodes'] = {'hosts': {n['name']: {} for n in nodes if n.get('slurm') == 'node'}}
        # Each boot of a Slurm fleet's node starts a fresh uptime (enter_boot_time_namespace), so PID 1's start
        # time since boot is about the same at every boot; /proc/stat's btime moves instead.
        inv['all']['vars']['nodeprep_boot_time_command'] = "awk '/^btime/ {print $2}' /proc/stat"
        # A Slurm job gets slurmd's memlock (PropagateResourceLimitsExcept=MEMLOCK), and slurmd cannot get more than
        # the node's init has when the machine withholds CAP_SYS_RESOURCE (REALITY.md, "Nodes"): ask for that much,
        # so that the memlock role's Slurm check judges what a job really gets here.
        if memlock_kib is not None:
            inv['all']['vars']['nodeprep_memlock_value'] = memlock_kib
    lines = ['# Written by tests/testbed/testbed.py up: the simulated fleet. Do not edit; run it again.'] + yaml_dump(inv)
    tmp = state_path('inventory.yml.tmp')
    with open(tmp, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.rename(tmp, state_path('inventory.yml'))


# --------------------------------------------------------------------------- commands

def require_root():
    if os.geteuid() != 0:
        raise TestbedError('the testbed needs root (network namespaces, overlay mounts, systemd-nspawn)')
    missing = [t for t in ('debootstrap', 'systemd-nspawn', 'ip', 'nsenter', 'ssh-keygen', 'mount')
               if shutil.which(t) is None]
    if missing:
        raise TestbedError('missing host tools: {0} (Debian: apt-get install debootstrap systemd-container '
                           'iproute2 util-linux openssh-client)'.format(', '.join(missing)))


def raise_inotify_limits(count):
    """Every node's systemd takes inotify instances from the host's per-user limit (128 by default on
    Debian), so about 12 nodes exhaust it. Raise the host limits (never lower them) and say so."""
    for knob, per_node, floor in (('max_user_instances', 64, 512), ('max_user_watches', 16384, 65536)):
        path = '/proc/sys/fs/inotify/' + knob
        try:
            with open(path) as f:
                current = int(f.read().strip())
            wanted = per_node * count + floor
            if current < wanted:
                with open(path, 'w') as f:
                    f.write(str(wanted))
                log('raised fs.inotify.{0} from {1} to {2} for {3} nodes'.format(knob, current, wanted, count))
        except (IOError, OSError, ValueError) as e:
            log('WARNING: cannot read or raise fs.inotify.{0}: {1}'.format(knob, e))


def cmd_up(args):
    require_root()
    t0 = time.time()
    with Lock():
        state = load_state()
        slurm = bool(args.slurm)
        wanted = plan_fleet(args.nodes, kinds=args.kinds, slurm=slurm, imex=bool(getattr(args, 'imex', False)))
        wanted_names = [n['name'] for n in wanted]
        extra = [n for n in state.get('nodes', {}) if n not in wanted_names]
        version = slurm_version() if slurm else None
        if state.get('nodes') and bool(state.get('slurm')) != slurm:
            log('the fleet is {0} a Slurm fleet now: replacing every node'.format('becoming' if slurm else 'no longer'))
            extra = sorted(state['nodes'])
        elif state.get('nodes') and slurm and state.get('slurm_version', '22.05') != version:
            log('the fleet runs Slurm {0}, {1} is asked for: replacing every node'.format(
                state.get('slurm_version', '22.05'), version))
            extra = sorted(state['nodes'])
        if extra:
            log('removing nodes not in the requested fleet: {0}'.format(', '.join(extra)))
            teardown(extra, state)
        rebuilt = ensure_repos()
        running = [n for n in state.get('nodes', {}) if nspawn_pids(n)]
        if rebuilt and running:
            log('WARNING: the repositories were rebuilt; running nodes ({0}) still see the old ones until '
                '`down` and `up`'.format(', '.join(running)))
        with CacheLock():            # another checkout's fleet may be building the same cached image
            bkey, base_rootfs = ensure_base()
            layers = {}
            for flavour in sorted(set(n['flavour'] for n in wanted)):
                layers[flavour] = ensure_layer(flavour, bkey, base_rootfs)
            slurm_layers = {}
            if slurm and SLURM_VERSIONS[version]['root']:
                root_key, root_upper = ensure_slurm_root(version)
                for flavour, role in sorted(set((n['flavour'], n['slurm']) for n in wanted)):
                    slurm_layers[(flavour, role)] = [ensure_slurm_root_layer(
                        version, flavour, role, layers[flavour], root_key, root_upper, base_rootfs), root_upper]
            elif slurm:
                apt_key, apt_dir = ensure_slurm_apt(bkey, base_rootfs)
                for flavour, role in sorted(set((n['flavour'], n['slurm']) for n in wanted)):
                    slurm_layers[(flavour, role)] = [ensure_slurm_layer(flavour, role, layers[flavour], base_rootfs,
                                                                        apt_key, apt_dir)]
        keyfile, pubkey = ensure_ssh_key()
        state['nodes'] = {n['name']: n for n in wanted}
        state['base'] = base_rootfs
        state['kernel'] = os.uname().release
        state['slurm'] = slurm
        if slurm:
            state['slurm_version'] = version
        else:
            state.pop('slurm_version', None)
        save_state(state)            # record first: a crash from here on is cleaned by `down`
        raise_inotify_limits(len(wanted))
        started = []
        for node in wanted:
            setup_network(node)
            provision_node(node, layers[node['flavour']], base_rootfs, pubkey,
                           slurm_lowers=slurm_layers.get((node['flavour'], node.get('slurm')), ()),
                           slurm_root=SLURM_VERSIONS[version]['root'] if slurm else None)
        if slurm:
            restarted = configure_slurm(wanted)
            if restarted:
                log('Slurm files changed: restarted the daemons on {0}'.format(', '.join(restarted)))
        for node in wanted:
            if start_node(node):
                started.append(node['name'])
        write_inventory(wanted, keyfile)
        if started:
            log('booting {0}'.format(', '.join(started)))
        wait_ssh([n for n in wanted if not os.path.exists(node_dir(n['name'], 'faults', 'node-down'))], BOOT_TIMEOUT)
        if slurm:
            write_inventory(wanted, keyfile, memlock_kib=node_memlock_kib(wanted))
    log('{0} node(s) up in {1:.0f} s; inventory: {2}'.format(len(wanted), time.time() - t0, state_path('inventory.yml')))
    return 0


def known_node_names(state):
    names = set(state.get('nodes', {}))
    if os.path.isdir(state_path('nodes')):
        names.update(os.listdir(state_path('nodes')))
    proc = run(['ip', 'netns', 'list'], check=False)
    for line in (proc.stdout or '').splitlines():
        ns = line.split()[0] if line.split() else ''
        if ns.startswith(PREFIX + '-'):
            names.add(ns[len(PREFIX) + 1:])
    return sorted(names)


def our_mounts():
    """Mount points under the state dir or the cache, deepest first."""
    out = []
    with open('/proc/self/mountinfo') as f:
        for line in f:
            mp = line.split()[4].replace('\\040', ' ')
            for top in (STATE_DIR, CACHE_DIR):
                if mp == top or mp.startswith(top.rstrip('/') + '/'):
                    out.append(mp)
    return sorted(set(out), key=lambda p: (-p.count('/'), p))


def teardown(names, state):
    stop_nodes(names)
    for name in names:
        umount(node_dir(name, 'root'))
        ns = '{0}-{1}'.format(PREFIX, name)
        if netns_inode(ns) is not None:
            run(['ip', 'netns', 'del', ns], check=False)
        node = state.get('nodes', {}).get(name)
        if node:
            run(['ip', 'link', 'del', node['veth_host']], check=False)
        prop = os.path.join('/run/systemd/nspawn/propagate', machine_name(name))
        if os.path.isdir(prop) and not os.path.ismount(prop):
            shutil.rmtree(prop, ignore_errors=True)
        shutil.rmtree(node_dir(name), ignore_errors=True)
        remove_node_cgroups(name)
        state.get('nodes', {}).pop(name, None)


def cmd_down(args):
    require_root()
    with Lock():
        state = load_state()
        names = known_node_names(state)
        if names:
            log('stopping {0}'.format(', '.join(names)))
        teardown(names, state)
        for mp in our_mounts():
            umount(mp)
        # empty folders systemd-nspawn leaves for the layer builds
        prop_top = '/run/systemd/nspawn/propagate'
        for entry in (os.listdir(prop_top) if os.path.isdir(prop_top) else []):
            p = os.path.join(prop_top, entry)
            if entry.startswith(PREFIX + '-build-') and not os.path.ismount(p):
                shutil.rmtree(p, ignore_errors=True)
        # veths of ours whose namespace is gone already (a crash between add and move)
        proc = run(['ip', '-o', 'link', 'show'], check=False)
        for line in (proc.stdout or '').splitlines():
            parts = line.split(':')
            if len(parts) > 1:
                ifname = parts[1].strip().split('@')[0]
                if ifname.startswith(PREFIX) and ifname[len(PREFIX):-1].isdigit() and ifname[-1] in 'hn':
                    run(['ip', 'link', 'del', ifname], check=False)
        for fn in ('state.json', 'inventory.yml'):
            try:
                os.unlink(state_path(fn))
            except OSError:
                pass
        shutil.rmtree(state_path('nodes'), ignore_errors=True)
        if args.purge:
            for entry in os.listdir(STATE_DIR):
                if entry != '.lock':
                    p = state_path(entry)
                    shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
    left = leftovers()
    if any(left.values()):
        raise TestbedError('left behind after down: {0}'.format(json.dumps(left)))
    log('down: no testbed namespace, mount or process left')
    return 0


def leftovers():
    proc = run(['ip', 'netns', 'list'], check=False)
    netns = [l.split()[0] for l in (proc.stdout or '').splitlines() if l.startswith(PREFIX + '-')]
    procs = []
    for pid in pids():
        argv = cmdline(pid)
        if argv and os.path.basename(argv[0]).startswith('systemd-nspawn') and any(a.startswith(STATE_DIR) for a in argv):
            procs.append(pid)
        elif len(argv) > 2 and argv[1] == os.path.abspath(__file__) and argv[2] == '_run':
            procs.append(pid)
    links = []
    proc = run(['ip', '-o', 'link', 'show'], check=False)
    for line in (proc.stdout or '').splitlines():
        parts = line.split(':')
        if len(parts) > 1 and parts[1].strip().startswith(PREFIX):
            links.append(parts[1].strip())
    return {'netns': netns, 'mounts': our_mounts(), 'processes': procs, 'links': links}


def node_status(node):
    name = node['name']
    running = bool(nspawn_pids(name))
    faults = sorted(os.listdir(node_dir(name, 'faults'))) if os.path.isdir(node_dir(name, 'faults')) else []
    boots = 0
    try:
        with open(node_dir(name, 'boots.log')) as f:
            boots = sum(1 for l in f if ' boot ' in l)
    except (IOError, OSError):
        pass
    return {'name': name, 'running': running, 'address': node['node_ip'], 'flavour': node['flavour'],
            'profile': node['profile'] or '-', 'faults': faults, 'boots': boots}


def cmd_status(args):
    state = load_state()
    rows = [node_status(n) for n in state.get('nodes', {}).values()]
    rows.sort(key=lambda r: r['name'])
    if args.json:
        print(json.dumps({'nodes': rows, 'leftovers': leftovers() if not rows else None}, indent=2))
        return 0
    if not rows:
        print('no testbed nodes')
        return 0
    print('{0:<22} {1:<8} {2:<14} {3:<11} {4:<15} {5:<5} {6}'.format(
        'NODE', 'STATE', 'ADDRESS', 'FLAVOUR', 'PROFILE', 'BOOTS', 'FAULTS'))
    for r in rows:
        print('{0:<22} {1:<8} {2:<14} {3:<11} {4:<15} {5:<5} {6}'.format(
            r['name'], 'running' if r['running'] else 'stopped', r['address'], r['flavour'], r['profile'],
            r['boots'], ','.join(r['faults']) or '-'))
    return 0


def get_node(state, name):
    nodes = state.get('nodes', {})
    if name not in nodes:
        raise TestbedError('no node {0!r} in the testbed; nodes: {1}'.format(name, ', '.join(sorted(nodes)) or '(none: run up)'))
    return nodes[name]


def fault_content(kind, args):
    """Content of the flag file, in the format the GPU double reads (gpu_double/lib/gpudouble.py)."""
    gpu = '' if args.gpu is None else str(args.gpu)
    if kind == 'xid':
        return '{0} {1}\n'.format(args.value or '79', gpu or '0')
    if kind == 'gpu-missing' and args.value:
        return '{0} {1}\n'.format(gpu or 'last', args.value)
    if kind in ('gpu-missing', 'gpu-removed', 'retired-pages', 'remapped-rows', 'dcgm-diag-fail', 'acs-on'):
        return gpu + '\n' if gpu else ''
    if kind in ('clocks-capped', 'power-capped'):
        return '{0}\n'.format(args.value) if args.value else ''
    if kind == 'shm-full':
        return '{0}\n'.format(args.value or '2147483648')
    if kind == 'fabric-in-progress':
        return gpu + '\n' if gpu else ''
    if kind == 'nvlink-down':
        return '{0} {1}\n'.format(gpu or '0 1', args.value or '0')
    if kind in FITNESS_GPU_FAULTS:
        words = (args.value or '').replace(',', ' ') if kind != 'nvlink-inactive' else (args.value or '')
        if not gpu and not words:
            return ''
        return ''.join('{0} {1}\n'.format(one, words).replace(' \n', '\n')
                       for one in (gpu.replace(',', ' ').split() or ['last']))
    if kind == 'allreduce-slow':
        return '{0}\n'.format(args.value) if args.value else ''
    if kind == 'dkms-build-fails':
        return '{0}\n'.format(args.value) if args.value else ''
    if kind == 'virtual-machine':
        value = args.value or 'kvm'
        if not re.match(r'^[a-z][a-z0-9-]{0,31}$', value):
            raise TestbedError('virtual-machine: --value {0!r} is not allowed; give a name systemd-detect-virt prints '
                               '(kvm, qemu, vmware, microsoft, xen...)'.format(args.value))
        return value + '\n'
    if kind == 'slow-boot':
        value = args.value or str(SLOW_BOOT_DEFAULT_S)
        if not value.isdigit() or not 0 < int(value) <= 3600:
            raise TestbedError('slow-boot: --value {0!r} is not allowed; give the seconds a reboot keeps the node '
                               'off, 1 to 3600'.format(args.value))
        return value + '\n'
    return ''


def stale_tree(node, value):
    """The <module>/<version> of the fault dkms-stale-tree: ``value``, else what the fault file recorded, else an old
    version of the node's NVIDIA DKMS module (nvidia on Ubuntu, nvidia-open on EL: R8, REALITY.md R1)."""
    if value:
        if value.count('/') != 1 or not all(value.split('/')):
            raise TestbedError('dkms-stale-tree --value {0!r}: allowed MODULE/VERSION, such as nvidia/535.104.05'.format(
                value))
        return value
    recorded = node_dir(node['name'], 'faults', 'dkms-stale-tree')
    if os.path.exists(recorded):
        with open(recorded) as f:
            text = f.read().strip()
        if text:
            return text
    return ('nvidia' if FLAVOURS[node['flavour']]['pkg'] == 'deb' else 'nvidia-open') + '/535.104.05'


def cmd_fault(args):
    require_root()
    if args.kind not in FAULTS:
        raise TestbedError('unknown fault {0!r}; allowed: {1}'.format(args.kind, ', '.join(sorted(FAULTS))))
    with Lock():
        state = load_state()
        node = get_node(state, args.node)
        faults = node_dir(node['name'], 'faults')
        os.makedirs(faults, exist_ok=True)
        if args.kind == 'node-down':
            with open(os.path.join(faults, 'node-down'), 'w') as f:
                f.write('veth {0} down\n'.format(node['veth_host']))
            run(['ip', 'link', 'set', node['veth_host'], 'down'])
        elif args.kind == 'ssh-hang':
            with open(os.path.join(faults, 'ssh-hang'), 'w') as f:
                f.write('every process frozen (cgroup.freeze)\n')
            set_frozen(node['name'], True)
        elif args.kind == 'ubuntu-signed':
            if FLAVOURS[node['flavour']]['pkg'] != 'deb':
                raise TestbedError('ubuntu-signed needs an Ubuntu node; {0} is {1}'.format(args.node, node['flavour']))
            with open(os.path.join(faults, 'ubuntu-signed'), 'w') as f:
                f.write("Ubuntu's signed driver installed\n")
            extra = 'linux-modules-nvidia-580-server-open-' + args.value if args.value else ''
            proc = node_exec(node['name'], ['sh', '-c', UBUNTU_SIGNED_APPLY.format(extra=extra)])
            sys.stdout.write(proc.stdout)
        elif args.kind == 'limits-site-file':
            kib = args.value or '65536'
            if not kib.isdigit() or int(kib) < 1:
                raise TestbedError('limits-site-file: --value {0!r} is not a number of KiB (1 or more)'.format(kib))
            with open(os.path.join(faults, 'limits-site-file'), 'w') as f:
                f.write('{0} with * hard memlock {1}\n'.format(LIMITS_SITE_FILE, kib))
            node_exec(node['name'], ['sh', '-c', LIMITS_SITE_APPLY.format(kib=int(kib))])
        elif args.kind in ('ubuntu-dkms', 'kernel-update'):
            if FLAVOURS[node['flavour']]['pkg'] != 'deb':
                raise TestbedError('{0} needs an Ubuntu node; {1} is {2}'.format(args.kind, args.node, node['flavour']))
            with open(os.path.join(faults, args.kind), 'w') as f:
                f.write('{0} applied\n'.format(args.kind))
            proc = node_exec(node['name'], ['sh', '-c', UBUNTU_DKMS_APPLY if args.kind == 'ubuntu-dkms'
                                            else KERNEL_UPDATE_APPLY])
            sys.stdout.write(proc.stdout)
        elif args.kind == 'dkms-stale-tree':
            mv = stale_tree(node, args.value)
            with open(os.path.join(faults, 'dkms-stale-tree'), 'w') as f:
                f.write(mv + '\n')
            node_exec(node['name'], ['sh', '-c', DKMS_STALE_APPLY.format(mv=mv, src=mv.replace('/', '-'))])
        elif args.kind == 'dcgm3':
            f = FLAVOURS[node['flavour']]
            with open(os.path.join(faults, 'dcgm3'), 'w') as handle:
                handle.write('datacenter-gpu-manager 1:3.3.9 installed\n')
            proc = node_exec(node['name'], ['sh', '-c', DCGM3_APPLY[f['pkg']].format(os='el{0}'.format(f['major']))])
            sys.stdout.write(proc.stdout)
        elif args.kind == 'devel-missing':
            with open(os.path.join(faults, 'devel-missing'), 'w') as f:
                f.write('devel/headers removed and excluded\n')
            script = DEVEL_MISSING_APPLY[FLAVOURS[node['flavour']]['pkg']].format(mark=DEVEL_MISSING_MARK,
                                                                                  apt=DEVEL_MISSING_APT)
            node_exec(node['name'], ['sh', '-c', script])
        else:
            flag = os.path.join(faults, FAULTS[args.kind]['flag'])
            with open(flag + '.tmp', 'w') as f:
                f.write(fault_content(args.kind, args))
            os.rename(flag + '.tmp', flag)
            if args.kind == 'shm-full':
                proc = node_exec(node['name'], ['/usr/local/lib/testbed/testbed-fault', 'apply'])
                sys.stdout.write(proc.stdout)
            elif args.kind in GPU_DOUBLE_VIEW_FAULTS and container_pid1(node['name']):
                node_exec(node['name'], ['/usr/lib/gpu-double/bin/gpu-double', 'views'], check=False)
    log('fault {0} injected on {1}'.format(args.kind, args.node))
    return 0


def cmd_heal(args):
    require_root()
    with Lock():
        state = load_state()
        node = get_node(state, args.node)
        faults = node_dir(node['name'], 'faults')
        present = sorted(os.listdir(faults)) if os.path.isdir(faults) else []
        if args.kind and args.kind not in FAULTS:
            raise TestbedError('unknown fault {0!r}; allowed: {1}'.format(args.kind, ', '.join(sorted(FAULTS))))
        kinds = [args.kind] if args.kind else [k for k in FAULTS if FAULTS[k]['flag'] in present]
        for kind in kinds:
            flag = os.path.join(faults, FAULTS[kind]['flag'])
            stale = stale_tree(node, None) if kind == 'dkms-stale-tree' else None
            if os.path.exists(flag):
                os.unlink(flag)
            if kind == 'node-down':
                run(['ip', 'link', 'set', node['veth_host'], 'up'])
            elif kind == 'ssh-hang':
                thaw_if_frozen(node['name'])
            elif kind == 'devel-missing' and container_pid1(node['name']):
                script = DEVEL_MISSING_HEAL[FLAVOURS[node['flavour']]['pkg']].format(mark=DEVEL_MISSING_MARK,
                                                                                     apt=DEVEL_MISSING_APT)
                node_exec(node['name'], ['sh', '-c', script])
            elif kind == 'dkms-stale-tree' and container_pid1(node['name']):
                node_exec(node['name'], ['sh', '-c', DKMS_STALE_HEAL.format(mv=stale, module=stale.split('/')[0])])
            elif kind == 'shm-full' and container_pid1(node['name']):
                node_exec(node['name'], ['/usr/local/lib/testbed/testbed-fault', 'heal', 'shm-full'])
            elif kind == 'limits-site-file' and container_pid1(node['name']):
                node_exec(node['name'], ['rm', '-f', LIMITS_SITE_FILE])
            elif kind in GPU_DOUBLE_VIEW_FAULTS and container_pid1(node['name']):
                node_exec(node['name'], ['/usr/lib/gpu-double/bin/gpu-double', 'views'], check=False)
        if not nspawn_pids(node['name']) and not read_pid(node_dir(node['name'], 'runner.pid')):
            log('{0} is powered off; booting it'.format(node['name']))
            start_node(node)
            wait_ssh([node], BOOT_TIMEOUT)
    log('healed {0} on {1}'.format(', '.join(kinds) or 'nothing', args.node))
    return 0


def cmd_ssh(args):
    state = load_state()
    node = get_node(state, args.node)
    argv = ['ssh', '-i', state_path('ssh', 'id_ed25519'), '-o', 'StrictHostKeyChecking=no',
            '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', 'root@' + node['node_ip']] + args.command
    os.execvp('ssh', argv)


def ssh_script(node, script, timeout=300):
    """Run a shell script on a node over SSH, as root (what Ansible does)."""
    argv = ['ssh', '-i', state_path('ssh', 'id_ed25519'), '-o', 'StrictHostKeyChecking=no', '-o',
            'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', '-o', 'BatchMode=yes',
            'root@' + node['node_ip'], 'sh', '-s']
    proc = subprocess.run(argv, input=script, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout


# Each check: (name, families it applies to, shell script; exit 0 = pass). They leave the node as they found it:
# package transactions go into a scratch root, apt into scratch lists.
SELFTEST_EL_ROOT = """set -e
st=/tmp/testbed-selftest; rm -rf $st; mkdir -p $st/repos $st/root
trap 'rm -rf $st' EXIT
r=/srv/testbed-repos/el{major}
dnf_st() {{ dnf -y -q --installroot $st/root --releasever {major} --setopt=reposdir=$st/repos \
    --setopt=cachedir=$st/cache --setopt=install_weak_deps=False --setopt=module_platform_id=platform:el{major} \
    --disableplugin='*' "$@"; }}
"""
SELFTESTS = [
    ('ethtool -K works (CAP_NET_ADMIN)', ('redhat', 'debian'), """set -e
ethtool -K eth0 gro off
ethtool -k eth0 | grep -qx 'generic-receive-offload: off'
ethtool -K eth0 gro on
echo 'ethtool -K eth0 gro off/on: ok'
"""),
    ('dnf installs from the signed EPEL and CUDA repositories with gpgcheck on', ('redhat',), SELFTEST_EL_ROOT + """
cat > $st/repos/t.repo <<EOF
[baseos]
name=baseos
baseurl=file://$r/baseos/
gpgcheck=0
[epel]
name=epel
baseurl=file://$r/epel/
gpgcheck=1
gpgkey=file://$r/epel/RPM-GPG-KEY-EPEL-{major}
[cuda]
name=cuda
baseurl=file://$r/cuda/
gpgcheck=1
repo_gpgcheck=1
gpgkey=file://$r/cuda/{cuda_key}
EOF
dnf_st install dkms nvidia-fabricmanager libnvidia-nscq
rpm --root $st/root -q dkms nvidia-fabricmanager libnvidia-nscq
rpm --root $st/root -q gpg-pubkey --qf '%{{SUMMARY}}\n'
# dkms is not in the distribution repository
if dnf -q --installroot $st/root --releasever {major} --setopt=reposdir=$st/repos --disablerepo=epel \
     --disableplugin='*' list --available dkms 2>/dev/null | grep -q '^dkms'; then echo 'dkms found outside EPEL'; exit 1; fi
echo 'signed epel + cuda with gpgcheck: ok'
"""),
    ('dnf refuses a package whose repository key is the wrong one', ('redhat',), SELFTEST_EL_ROOT + """
cat > $st/repos/t.repo <<EOF
[baseos]
name=baseos
baseurl=file://$r/baseos/
gpgcheck=0
[epel]
name=epel
baseurl=file://$r/epel/
gpgcheck=1
gpgkey=file://$r/cuda/{cuda_key}
EOF
if dnf_st install dkms > $st/out 2>&1; then cat $st/out; echo 'installed with the wrong key'; exit 1; fi
grep -q -e 'GPG check FAILED' -e 'not correct for this package' -e 'Public key for .* is not installed' $st/out || {{ cat $st/out; exit 1; }}
echo 'wrong key refused: ok'
"""),
    ('ELRepo: EL10 fails with the v1 key listed, every EL installs with its keys', ('redhat',), SELFTEST_EL_ROOT + """
write() {{
cat > $st/repos/t.repo <<EOF
[baseos]
name=baseos
baseurl=file://$r/baseos/
gpgcheck=0
[elrepo]
name=elrepo
baseurl=file://$r/elrepo/
gpgcheck=1
gpgkey=$1
EOF
}}
v1=file://$r/elrepo/RPM-GPG-KEY-elrepo.org; v2=file://$r/elrepo/RPM-GPG-KEY-v2-elrepo.org
write "$v1 $v2"
if [ {major} -ge 10 ]; then
    if dnf_st install kernel-ml-headers > $st/out 2>&1; then echo 'EL10 imported the v1 key'; exit 1; fi
    grep -q 'Key import failed' $st/out || {{ cat $st/out; exit 1; }}
    rm -rf $st/root/*; write "$v2"
fi
dnf_st install kernel-ml-headers
echo 'elrepo keys: ok'
"""),
    ('apt sees the signed CUDA repository; the wrong key is refused', ('debian',), """set -e
st=/tmp/testbed-selftest; rm -rf $st; mkdir -p $st/lists/partial $st/keys
trap 'rm -rf $st' EXIT
apt_st() { apt-get -q -o Dir::Etc::sourcelist=$st/sources.list -o Dir::Etc::sourceparts=- \
    -o Dir::State::Lists=$st/lists -o APT::Get::List-Cleanup=0 update 2>&1 || true; }
cp /srv/testbed-repos/apt/cuda/3bf863cc.pub $st/keys/cuda.asc
echo "deb [signed-by=$st/keys/cuda.asc] file:/srv/testbed-repos/apt/cuda/ ./" > $st/sources.list
out=$(apt_st); echo "$out" | grep -q '^[WE]:' && { echo "$out"; exit 1; }
ls $st/lists | grep -q InRelease || { echo 'no InRelease fetched'; exit 1; }
rm -rf $st/lists/*InRelease* $st/lists/*Packages*
mkdir -p $st/lists/partial
cp /srv/testbed-repos/el9/cuda/D42D0685.pub $st/keys/cuda.asc
out=$(apt_st); echo "$out" | grep -q -e NO_PUBKEY -e 'not signed' -e EXPKEYSIG || { echo "$out"; exit 1; }
echo 'apt signed-by: ok'
"""),
]


def cmd_selftest(args):
    """Check on the running fleet what a real root shell can do there (REALITY.md): exit 1 if any check fails."""
    state = load_state()
    nodes = [n for n in state.get('nodes', {}).values() if not args.node or n['name'] in args.node]
    if not nodes:
        raise TestbedError('no running node to test (make testbed-up first)')
    failed = 0
    for node in sorted(nodes, key=lambda n: n['index']):
        f = FLAVOURS[node['flavour']]
        keys = {'major': f['major'], 'cuda_key': 'CDF6BA43.pub' if f['major'] == 10 else 'D42D0685.pub'}
        for name, families, script in SELFTESTS:
            if node['family'] not in families:
                continue
            rc, out = ssh_script(node, script.format(**keys) if '{major}' in script else script)
            ok = rc == 0
            failed += 0 if ok else 1
            log('{0} {1}: {2}'.format('PASS' if ok else 'FAIL', node['name'], name))
            if not ok or args.verbose:
                sys.stdout.write(''.join('    ' + l + '\n' for l in out.strip().splitlines()[-25:]))
    # Host side: every node under a cgroup of its own (two nodes sharing system.slice/<unit> disturb each other).
    for node in sorted(nodes, key=lambda n: n['index']):
        pid1 = container_pid1(node['name'])
        paths = []
        if pid1 is not None:
            with open('/proc/{0}/cgroup'.format(pid1)) as f:
                paths = sorted(l.split(':', 2)[2].strip() for l in f if l.split(':', 2)[1] in ('', 'name=systemd'))
        mine = '/testbed-{0}/{1}/'.format(PREFIX, node['name'])
        ok = bool(paths) and all(p.startswith(mine) for p in paths)
        failed += 0 if ok else 1
        log('{0} {1}: own cgroup ({2})'.format('PASS' if ok else 'FAIL', node['name'], ', '.join(paths) or 'not running'))
    log('selftest: {0} failed'.format(failed) if failed else 'selftest: all passed')
    return 1 if failed else 0


def main(argv=None):
    p = argparse.ArgumentParser(prog='testbed.py', description='Simulated GPU fleet for gpufleet.nodeprep.')
    sub = p.add_subparsers(dest='cmd')
    up = sub.add_parser('up', help='bring the fleet up (safe to run again)')
    up.add_argument('--nodes', type=int, default=int(os.environ.get('NODES') or 4))
    up.add_argument('--kinds', default=os.environ.get('TESTBED_KINDS') or None,
                    help='GPU node kinds to cycle through, comma-separated (default: all four: ' +
                         ','.join(template_key(t) for t in TEMPLATES) + ')')
    up.add_argument('--imex', action='store_true', default=os.environ.get('TESTBED_IMEX') in ('1', 'yes', 'true'),
                    help='put the GB200/GB300 nodes in one IMEX domain (inventory group {0}, routed to each other; '
                         'TESTBED_IMEX=1 is the same)'.format(IMEX_GROUP))
    up.add_argument('--slurm', action='store_true', default=os.environ.get('TESTBED_SLURM') in ('1', 'yes', 'true'),
                    help='add a Slurm head node (slurmctld, no GPU) and run slurmd on every GPU node (Debian 13\'s '
                         'Slurm 24.11; TESTBED_SLURM_VERSION=22.05: Debian 12\'s); TESTBED_SLURM=1 does the same')
    down = sub.add_parser('down', help='stop the fleet; leave no namespace, mount or process')
    down.add_argument('--purge', action='store_true', help='also delete .testbed (repositories, SSH key)')
    st = sub.add_parser('status', help='show the nodes')
    st.add_argument('--json', action='store_true')
    fa = sub.add_parser('fault', help='inject a fault: ' + '; '.join('{0}: {1}'.format(k, v['help']) for k, v in sorted(FAULTS.items())))
    fa.add_argument('node')
    fa.add_argument('kind')
    fa.add_argument('--gpu', help='GPU index or PCI bus id')
    fa.add_argument('--value')
    he = sub.add_parser('heal', help='remove one fault (or all) from a node')
    he.add_argument('node')
    he.add_argument('kind', nargs='?')
    sh = sub.add_parser('ssh', help='log into a node')
    sh.add_argument('node')
    sh.add_argument('command', nargs=argparse.REMAINDER)
    se = sub.add_parser('selftest', help='check on the running nodes what a real root shell can do: ethtool -K, '
                                         'signed repositories with gpgcheck on, key refusals')
    se.add_argument('node', nargs='*', help='only these nodes (default: all)')
    se.add_argument('-v', '--verbose', action='store_true')
    rn = sub.add_parser('_run')
    rn.add_argument('node')
    args = p.parse_args(argv)
    handlers = {'up': cmd_up, 'down': cmd_down, 'status': cmd_status, 'fault': cmd_fault,
                'heal': cmd_heal, 'ssh': cmd_ssh, 'selftest': cmd_selftest, '_run': cmd_run}
    if args.cmd not in handlers:
        p.print_help()
        return 2
    try:
        return handlers[args.cmd](args)
    except TestbedError as e:
        log('error: {0}'.format(e))
        return 1


if __name__ == '__main__':
    sys.exit(main())
