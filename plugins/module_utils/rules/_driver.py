# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The decisions of the nvidia_driver role (and the kernel role's ELRepo keys), as pure functions.

``driver_plan(facts, settings, node, stage, run, check_mode)`` returns what to install, pin, enable and remove, what
needs a reboot and why, what stops the role before a reboot, and what check mode must predict.  ``facts`` are the
kernel_state/nvidia/services facts and the OS; ``node`` is what the gather read of the driver's packages
(``kernel_state.driver_node``: repositories, installed NVIDIA packages, versionlock list, apt holds, module stream);
``run`` is what this run did so far (run_state: the role's later stages plan again through node_plan with it).
The role's plan (_plan_nvidia_driver.plan) turns this into the lists its tasks loop over.
No Ansible import: the node plan and the pytest tables call these functions.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import hashlib
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver_ubuntu
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._dkms_status import DKMS_MODULES
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._driver_packages import (
    CUDA_EL_KEYS,
    NVIDIA_STACK_RE,
    NVLINK5_PACKAGES,
    family_of,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nvswitch_fabric import nvswitch_fabric


class PlanError(Exception):
    """Settings the plan cannot work with."""


# ----------------------------------------------------------------------------------------------------- constants

# Architectures (as nvidia-smi names them) that only NVIDIA's open kernel modules support.
OPEN_ONLY_ARCHITECTURES = ('Blackwell', 'Rubin', 'Rubin Ultra', 'Feynman')
# PCI device-ID ranges of Blackwell chips, for when nvidia-smi cannot run yet.  Source: the chip table in NVIDIA's
# gpu-admin-tools (gpu/devid_chips.py): GB100/GB102 0x2900-0x29ff, GB110/GB112 0x3180-0x327f, GB202/GB203
# 0x2b80-0x2c7f, GB206/GB207 0x2d00-0x2dff, GB205 0x2f00-0x2f7f.
OPEN_ONLY_DEVICE_ID_RANGES = ((0x2900, 0x29ff), (0x3180, 0x327f), (0x2b80, 0x2c7f), (0x2d00, 0x2dff), (0x2f00, 0x2f7f))
BLACKWELL_MIN_VERSION = '570.133.20'

# R28: from branch 620 on NVIDIA ships only the open kernel modules (NVIDIA Driver Installation Guide 620, "Kernel
# Modules": open modules only; "Recent Updates": proprietary kernel modules removed).  610 still documents both.
OPEN_ONLY_FROM_BRANCH = 620
# Rubin: the first branch that runs Rubin GPUs is R615 (NVIDIA/cutlass discussion #3555, CUTLASS's release notes:
# executing Rubin (SM107) kernels requires the R615 driver released with CUDA 13.4 GA; the R610 driver of the CUDA
# 13.4 developer preview is not sufficient).
RUBIN_MIN_BRANCH = 615
RUBIN_ARCHITECTURES = ('Rubin', 'Rubin Ultra')
# No PCI device ID of a Rubin GPU is public (checked 2026-12-02): the "Compatible GPUs" table of
# NVIDIA/open-gpu-kernel-modules' README (newest public release 595.45.04) ends with Blackwell (B300, GB300),
# NVIDIA/gpu-admin-tools' gpu/devid_chips.py lists Blackwell chips only, and pci.ids has no Rubin entry.  Rubin is
# therefore recognised only from nvidia-smi's architecture name, i.e. only while a driver is loaded; on a node without
# a driver, nodeprep_nvidia_driver_branch is not checked against Rubin.  Add ranges here once NVIDIA publishes them.
RUBIN_DEVICE_ID_RANGES = ()
CUDA_APT_KEY = '3bf863cc.pub'
CUDA_BASE = 'https://developer.download.nvidia.com/compute/cuda/repos/'

# ELRepo keys (R6): EL10 is signed with the v2 key only, and dnf aborts when a listed key fails to import.
ELREPO_KEY_V1 = 'https://www.elrepo.org/RPM-GPG-KEY-elrepo.org'
ELREPO_KEY_V2 = 'https://www.elrepo.org/RPM-GPG-KEY-v2-elrepo.org'
ELREPO_KEYS = {'8': [ELREPO_KEY_V1, ELREPO_KEY_V2], '9': [ELREPO_KEY_V1, ELREPO_KEY_V2], '10': [ELREPO_KEY_V2]}

# EPEL (R4: dkms lives there) and the repository EPEL packages need beside it (EL8 powertools, EL9/10 crb).
# EPEL_URL's {major} is the EPEL release directory (epel_release): the major version, or on EL10 the minor release.
EPEL_REPO_ID = 'nodeprep-epel'
EPEL_URL = 'https://dl.fedoraproject.org/pub/epel/{major}/Everything/{arch}/'
EPEL_KEY = 'https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-{major}'
CRB_REPO_IDS = {'8': ('powertools', 'codeready-builder-for-rhel-8-{arch}-rpms'),
                '9': ('crb', 'codeready-builder-for-rhel-9-{arch}-rpms'),
                '10': ('crb', 'codeready-builder-for-rhel-10-{arch}-rpms')}

# The packages of each set (R12).  EL: `nvidia-open` pulls the desktop stack; NVIDIA documents `nvidia-driver-cuda`
# with the kmod for headless compute nodes.  apt: the compute-only set is apt_compute_packages (R26).
EL_PACKAGES = {
    ('full', 'open'): ['nvidia-open'],
    ('full', 'proprietary'): ['cuda-drivers'],
    ('compute', 'open'): ['nvidia-driver-cuda', 'kmod-nvidia-open-dkms'],
    ('compute', 'proprietary'): ['nvidia-driver-cuda', 'kmod-nvidia-latest-dkms'],
}
APT_PACKAGES = {('full', 'open'): ['nvidia-open'], ('full', 'proprietary'): ['cuda-drivers']}
# Packages that tell the installed driver version when DKMS cannot (version is the driver's).
DRIVER_VERSION_PACKAGES = ('kmod-nvidia-open-dkms', 'kmod-nvidia-latest-dkms', 'nvidia-driver-cuda', 'nvidia-driver',
                           'nvidia-kmod-common', 'nvidia-open', 'cuda-drivers')

PERSISTENCED_DROPIN = '/etc/systemd/system/nvidia-persistenced.service.d/nodeprep-persistence-mode.conf'
PERSISTENCED_WANTS = '/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service'
# R7: Ubuntu's unit runs the daemon with --no-persistence-mode, is static and StopWhenUnneeded.  The drop-in turns
# persistence mode on and keeps the daemon running; the wants link starts it at boot (a static unit has no [Install]).
PERSISTENCED_DROPIN_TEXT = (
    '# Managed by gpufleet.nodeprep.nvidia_driver: the packaged unit runs --no-persistence-mode and stops when unneeded.\n'
    '[Unit]\n'
    'StopWhenUnneeded=false\n'
    '\n'
    '[Service]\n'
    'ExecStart=\n'
    'ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --persistence-mode --verbose\n')

# NVLSM talks to the switches through ib_umad (R3): loaded at every boot by this file.
IB_UMAD_CONF = '/etc/modules-load.d/nodeprep-nvlsm.conf'
IB_UMAD_CONF_TEXT = (
    '# NVLSM (started by nvidia-fabricmanager on NVLink 5 systems) talks to the switches through ib_umad.\n'
    '# Managed by gpufleet.nodeprep.\n'
    'ib_umad\n')

# The unit of nvidia-persistenced for a driver installed from NVIDIA's runfile, which ships the daemon but no unit.
RUNFILE_UNIT = '/etc/systemd/system/nvidia-persistenced.service'
RUNFILE_UNIT_TEXT = (
    '# Managed by gpufleet.nodeprep.nvidia_driver: nvidia-persistenced of a driver installed from NVIDIA\'s runfile.\n'
    '[Unit]\n'
    'Description=NVIDIA Persistence Daemon\n'
    'Wants=syslog.target\n'
    '\n'
    '[Service]\n'
    'Type=forking\n'
    'ExecStart=/usr/bin/nvidia-persistenced --verbose\n'
    'ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced\n'
    '\n'
    '[Install]\n'
    'WantedBy=multi-user.target\n')

SECURE_BOOT_REMEDY = (
    'enrol the DKMS signing key{key} as a Machine Owner Key (mokutil --import {path}, reboot, confirm the enrolment in '
    'the MOK manager at the console), then run the role again; or turn Secure Boot off in the firmware')


# ----------------------------------------------------------------------------------------------------- helpers

def version_tuple(version):
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r'[.-]', version or '') if p != '')


def repo_distro(os_facts):
    """NVIDIA's repository directory name: rhel9, ubuntu2404, debian12."""
    if family_of(os_facts) == 'el':
        return 'rhel{0}'.format(os_facts['distribution_major_version'])
    dist = os_facts.get('distribution', '')
    if dist == 'Ubuntu':
        return 'ubuntu' + str(os_facts.get('distribution_version', '')).replace('.', '')
    return dist.lower() + str(os_facts.get('distribution_major_version', ''))


def repo_arch(os_facts):
    return 'sbsa' if os_facts.get('architecture') == 'aarch64' else os_facts.get('architecture') or 'x86_64'


def cuda_key_file(os_facts):
    """R5: the key NVIDIA signs this host's CUDA repository with."""
    if family_of(os_facts) == 'el':
        return CUDA_EL_KEYS[str(os_facts['distribution_major_version'])]
    return CUDA_APT_KEY


def elrepo_keys(major):
    """R6: the ELRepo keys to list for an EL major version (EL10: v2 only)."""
    return list(ELREPO_KEYS.get(str(major), [ELREPO_KEY_V2]))


def fabricmanager_package(family, branch):
    """R1: EL < 580 nvidia-fabric-manager, 580+ nvidia-fabricmanager; apt < 580 nvidia-fabricmanager-<branch>, 580+
    nvidia-fabricmanager.  Source: NVIDIA/gpu-driver-container fabricmanager_install() (rhel8/9, ubuntu)."""
    if int(branch) >= 580:
        return 'nvidia-fabricmanager'
    return 'nvidia-fabric-manager' if family == 'el' else 'nvidia-fabricmanager-{0}'.format(branch)


def nscq_package(family, branch):
    """R1: libnvidia-nscq-<branch> below 580 (EL and apt), libnvidia-nscq from 580 on (nscq_install())."""
    return 'libnvidia-nscq' if int(branch) >= 580 else 'libnvidia-nscq-{0}'.format(branch)


def apt_compute_packages(branch, module_type):
    """R26: NVIDIA's compute-only set on Debian/Ubuntu.  NVIDIA Driver Installation Guide, "Compute-only and Desktop
    Installation" (Ubuntu/Debian: ``apt -V install libnvidia-compute nvidia-dkms-open``, ``nvidia-dkms`` for the
    proprietary modules), with the branch in the names below 590 ("Ubuntu 590 and later packages":
    libnvidia-compute-580 -> libnvidia-compute, nvidia-dkms-580-open -> nvidia-dkms-open).  That set has no
    nvidia-smi: libnvidia-compute-<B> depends on libc6, libgcc-s1, libssl3t64, nvidia-kernel-common-<B>-<V> and
    ocl-icd-libopencl1, nvidia-dkms-<B>-open on dkms, nvidia-kernel-common-<B> and nvidia-kernel-source-<B>-open
    (packages.ubuntu.com, 580); nvidia-smi is in nvidia-utils(-<B>), which is added here.  nvidia-persistenced (not in
    the set either) is one of the extras the plan installs on every repo node."""
    sfx = '' if int(branch) >= 590 else '-{0}'.format(branch)
    dkms = 'nvidia-dkms{0}{1}'.format(sfx, '-open' if module_type == 'open' else '')
    return ['libnvidia-compute' + sfx, dkms, 'nvidia-utils' + sfx]


def epel_release(os_facts):
    """R27: the EPEL release directory under pub/epel/ for this host.  EPEL 8 and 9 are one repository per major
    version; EPEL 10 has one per minor release of RHEL 10 (Fedora EPEL documentation, "EPEL branches"): epel/10 is the
    leading minor, for CentOS Stream 10, and RHEL 10.x and its rebuilds (Rocky, AlmaLinux, Oracle Linux) use
    epel/10.x.  epel-release's own repository file says the same
    (``pub/epel/$releasever_major${releasever_minor:+.$releasever_minor}/``).  Ansible (and the gather) report
    CentOS Stream as distribution CentOS with version 10, a RHEL-like 10.x as 10.x."""
    major = str(os_facts.get('distribution_major_version', ''))
    version = str(os_facts.get('distribution_version', ''))
    if major != '10' or os_facts.get('distribution') == 'CentOS':
        return major
    match = re.match(r'^10\.(\d+)', version)
    return '10.{0}'.format(match.group(1)) if match else major


def rubin_reasons(nvidia):
    """Why this node has Rubin GPUs (empty: none seen).  nvidia-smi's architecture name only: no Rubin PCI device ID
    is public (RUBIN_DEVICE_ID_RANGES)."""
    gpus = nvidia.get('gpus') or []
    out = []
    for arch in RUBIN_ARCHITECTURES:
        hits = [str(g.get('index')) for g in gpus if str(g.get('architecture') or '').strip().lower() == arch.lower()]
        if hits:
            out.append('nvidia-smi reports GPU {0} as {1}'.format(', '.join(hits), arch))
    return out


def nvsdm_package(family, branch):
    """R22: NVSDM, the NVSwitch monitoring library of NVLink 5: libnvsdm from 580 on, libnvsdm-<branch> below (EL and
    apt; nvsdm_install() in gpu-driver-container's rhel9/install.sh and ubuntu24.04/precompiled/nvidia-driver)."""
    return 'libnvsdm' if int(branch) >= 580 else 'libnvsdm-{0}'.format(branch)


def fabric_package_names(family):
    """Every name the fabric manager, nscq and NVSDM have had, for finding the ones to remove on a branch move."""
    return re.compile(r'^(nvidia-fabric-?manager(-\d{3})?|libnvidia-nscq(-\d{3})?|libnvsdm(-\d{3})?)$')


# R22: "libnvsdm packages are not available for arm64" (gpu-driver-container nvsdm_install()).
NVSDM_ARCHES = ('x86_64', 'amd64')


def apt_version_pattern(version):
    """R21: the apt version pattern of a package at the driver's version.  NVIDIA's fabric manager, nscq, nvsdm and
    imex are '<V>-1' below 590 and '<V>-1ubuntu1' from 590 on, the driver packages '<V>-0ubuntu1' / '<V>-1ubuntu1':
    the release is matched, not written ('<V>-*', as gpu-driver-container pins '=${DRIVER_VERSION}*')."""
    return '{0}-*'.format(version)


def package_spec(family, name, version):
    """A package at exactly the driver's version: EL name-<ver>, apt name=<ver>-* (any Debian release, R21)."""
    if not version:
        return name
    return '{0}-{1}'.format(name, version) if family == 'el' else '{0}={1}'.format(name, apt_version_pattern(version))


def lock_entry(pkg):
    """The versionlock.list line dnf writes for an installed package: name-epoch:version-release.* (R9)."""
    return '{0}-{1}:{2}-{3}.*'.format(pkg['name'], pkg.get('epoch') or 0, pkg['version'], pkg['release'])


_LOCK_RE = re.compile(r'^(?P<name>.+)-(?P<epoch>\d+):(?P<version>[^-]+)-(?P<release>.+)\.(?P<arch>[^.]+)$')


def lock_entry_name(entry):
    match = _LOCK_RE.match(entry.lstrip('!'))
    return match.group('name') if match else None


def wanted_match(version, branch, exact):
    """Does a driver version belong to what was asked for (the exact version, else the branch)?"""
    if not version:
        return False
    if exact:
        return version == exact
    return version.startswith('{0}.'.format(branch))


def device_ids(kernel_state, nvidia):
    ids = []
    for gpu in (kernel_state.get('pci') or {}).get('gpus') or []:
        ids.append(gpu.get('device_id'))
    for gpu in nvidia.get('gpus') or []:
        ids.append(gpu.get('pci_device_id'))
    result = []
    for raw in ids:
        if not raw:
            continue
        text = str(raw).lower()
        text = text[2:] if text.startswith('0x') else text
        text = text[:4]
        if re.match(r'^[0-9a-f]{4}$', text) and text not in result:
            result.append(text)
    return result


def open_required_reasons(kernel_state, nvidia, extra_ids=()):
    """Why the open kernel modules are required on this node (empty: they are not)."""
    reasons = []
    gpus = nvidia.get('gpus') or []
    for arch in OPEN_ONLY_ARCHITECTURES:
        # nvidia-smi's spelling, in any letter case.
        hits = [str(g.get('index')) for g in gpus if str(g.get('architecture') or '').strip().lower() == arch.lower()]
        if hits:
            reasons.append('nvidia-smi reports GPU {0} as {1}'.format(', '.join(hits), arch))
    extra = [str(i).lower().replace('0x', '') for i in extra_ids or []]
    for devid in device_ids(kernel_state, nvidia):
        number = int(devid, 16)
        if devid in extra or any(lo <= number <= hi for lo, hi in OPEN_ONLY_DEVICE_ID_RANGES):
            reason = 'PCI device ID 0x{0} is Blackwell or newer'.format(devid)
            if reason not in reasons:
                reasons.append(reason)
    return reasons


def installed_driver_version(kernel_state, nvidia, packages, boot_kernel):
    """The installed driver: DKMS build for the kernel that boots next, else the driver package, else nvidia-smi."""
    for entry in kernel_state.get('dkms') or []:
        if entry.get('module') in DKMS_MODULES and entry.get('kernel') == boot_kernel and \
                entry.get('status') == 'installed':
            return entry.get('version'), 'dkms'
    for name in DRIVER_VERSION_PACKAGES:
        for pkg in packages.get(name) or []:
            return pkg['version'], 'package ' + name
    if nvidia.get('driver_version'):
        return nvidia['driver_version'], 'nvidia-smi'
    return '', None


def dkms_version_for(kernel_state, boot_kernel):
    for entry in kernel_state.get('dkms') or []:
        if entry.get('module') in DKMS_MODULES and entry.get('kernel') == boot_kernel and \
                entry.get('status') == 'installed':
            return entry.get('version')
    return ''


def persistence_conflicts(services, units):
    found = []
    for name, svc in sorted((services or {}).items()):
        if name == 'nvidia-persistenced.service' or name not in (units or []):
            continue
        status = svc.get('status')
        if (status is not None and status not in ('disabled', 'masked', 'not-found', 'static')) or \
                svc.get('state') == 'running':
            found.append(name)
    return found


def units_present(services):
    return [name for name, svc in (services or {}).items() if svc.get('status') not in (None, 'not-found')]


# ----------------------------------------------------------------------------------------------------- validation

def refusals(os_facts, settings, open_reasons, nvidia=None, host=None):
    """Cross-field rules argument_specs cannot express: [(check, message)], each message naming the value and what is
    allowed.  check: platform, branch, version, runfile, proprietary, blackwell, proprietary_branch, rubin.
    ``nvidia`` (the nvidia facts) and ``host`` (the name the messages use) are optional."""
    out = []
    fam = family_of(os_facts)
    branch = str(settings.get('branch', ''))
    version = settings.get('version') or ''
    if fam == 'unsupported':
        msg = ('gpufleet.nodeprep.nvidia_driver supports EL 8/9/10, Ubuntu 22.04/24.04 and Debian 12; this host runs '
               '{0} {1} (os_family {2}).'.format(os_facts.get('distribution'), os_facts.get('distribution_version'),
                                                 os_facts.get('os_family')))
        out.append(('platform', msg))
        return out
    if not re.match(r'^[0-9]{3}$', branch):
        msg = ('nodeprep_nvidia_driver_branch={0} is not a driver branch; give its three-digit number, e.g. 580 '
               '(R580 LTS), 590, 595.'.format(branch))
        out.append(('branch', msg))
        return out
    if version and not re.match(r'^' + branch + r'\.[0-9]+(\.[0-9]+)?$', version):
        msg = ('nodeprep_nvidia_driver_version={0} is not a version of branch nodeprep_nvidia_driver_branch={1}; '
               'allowed: {1}.<minor>[.<patch>] (e.g. {1}.95.05) or empty for the newest of the branch.'
               .format(version, branch))
        out.append(('version', msg))
    if settings.get('method') == 'runfile' and not version:
        msg = ('nodeprep_nvidia_driver_method=runfile needs nodeprep_nvidia_driver_version (the exact version of the '
               '.run file, e.g. {0}.95.05); it is empty.'.format(branch))
        out.append(('runfile', msg))
    if settings.get('module_type') == 'proprietary' and open_reasons:
        msg = ('nodeprep_nvidia_driver_module_type=proprietary is not supported on this node: {0}. Blackwell and '
               'newer GPUs run only with NVIDIA\'s open kernel modules; allowed here: open.'
               .format('; '.join(open_reasons)))
        out.append(('proprietary', msg))
    too_old = int(branch) < 570 or (version and version_tuple(version) < version_tuple(BLACKWELL_MIN_VERSION))
    if open_reasons and too_old:
        msg = ('nodeprep_nvidia_driver_branch={0}{1} is too old for this node ({2}): Blackwell needs {3} or newer '
               '(branch 570 or later; 580 is the LTS branch).'.format(
                   branch, ' / nodeprep_nvidia_driver_version=' + version if version else '',
                   '; '.join(open_reasons), BLACKWELL_MIN_VERSION))
        out.append(('blackwell', msg))
    where = host or 'this node'
    if settings.get('module_type') == 'proprietary' and int(branch) >= OPEN_ONLY_FROM_BRANCH:
        msg = ('nodeprep_nvidia_driver_module_type=proprietary cannot be installed on {0} with '
               'nodeprep_nvidia_driver_branch={1}: NVIDIA ships only the open kernel modules from branch {2} on '
               '(driver installation guide {2}, "Kernel Modules"); allowed: module_type open, or proprietary with a '
               'branch below {2} (e.g. 580, the LTS branch).'.format(where, branch, OPEN_ONLY_FROM_BRANCH))
        out.append(('proprietary_branch', msg))
    rubin = rubin_reasons(nvidia or {})
    if rubin and int(branch) < RUBIN_MIN_BRANCH:
        msg = ('nodeprep_nvidia_driver_branch={0} cannot drive the GPUs of {1} ({2}): Rubin GPUs need branch {3} or '
               'later; allowed here: {3} or a later branch.'.format(branch, where, '; '.join(rubin), RUBIN_MIN_BRANCH))
        out.append(('rubin', msg))
    return out


# ----------------------------------------------------------------------------------------------------- the plan

def _repo(os_facts, settings, node):
    fam = family_of(os_facts)
    distro = repo_distro(os_facts)
    url = settings.get('repo_url') or '{0}{1}/{2}/'.format(CUDA_BASE, distro, repo_arch(os_facts))
    key_file = cuda_key_file(os_facts)
    gpgcheck = bool(settings.get('repo_gpgcheck', True))
    gpgkey = (settings.get('repo_gpgkey') or url + key_file) if gpgcheck else None
    repo = {'name': 'cuda-' + distro, 'description': 'NVIDIA CUDA ' + distro, 'distro': distro, 'url': url,
            'key_file': key_file, 'gpgcheck': gpgcheck, 'gpgkey': gpgkey}
    if fam == 'el':
        current = (node.get('repos') or {}).get(repo['name'])
        repo['changes'] = not (current and current.get('baseurl') == url and
                               bool(current.get('gpgcheck')) == gpgcheck and
                               (not gpgcheck or current.get('gpgkey') == gpgkey) and current.get('enabled', True))
    else:
        repo['apt_sources'] = '/etc/apt/sources.list.d/nodeprep-cuda.sources'
        repo['apt_keyring'] = '/etc/apt/keyrings/nodeprep-cuda.asc'
        repo['apt_content'] = ('# Managed by gpufleet.nodeprep.nvidia_driver\nTypes: deb\nURIs: {0}\nSuites: /\n{1}\n'
                               .format(url, 'Signed-By: ' + repo['apt_keyring'] if gpgcheck else 'Trusted: yes'))
        repo['changes'] = node.get('apt_sources_content') != repo['apt_content'] or \
            (gpgcheck and not node.get('apt_keyring_present'))
    return repo


def _epel(os_facts, settings, node, needed):
    major = str(os_facts.get('distribution_major_version'))
    arch = os_facts.get('architecture') or 'x86_64'
    repos = node.get('repos') or {}
    mode = settings.get('epel', 'auto')
    wanted = family_of(os_facts) == 'el' and (mode == 'always' or (mode == 'auto' and needed))
    enabled_epel = [rid for rid, r in repos.items() if r.get('enabled', True) and rid in ('epel', EPEL_REPO_ID)]
    other_epel = [rid for rid in enabled_epel if rid != EPEL_REPO_ID]
    url = settings.get('epel_url') or EPEL_URL.format(major=epel_release(os_facts), arch=arch)
    gpgkey = settings.get('epel_gpgkey') or (
        settings['epel_url'] + 'RPM-GPG-KEY-EPEL-' + major if settings.get('epel_url') else EPEL_KEY.format(major=major))
    define = wanted and not other_epel
    current = repos.get(EPEL_REPO_ID)
    crb_ids = [i.format(arch=arch) for i in CRB_REPO_IDS.get(major, ())]
    crb = next((i for i in crb_ids if i in repos), None)
    crb_enable = bool(wanted and crb and not repos[crb].get('enabled', True))
    return {
        'needed': wanted,
        'define': define,
        'id': EPEL_REPO_ID,
        'description': 'Extra Packages for Enterprise Linux {0} (gpufleet.nodeprep)'.format(major),
        'url': url,
        'gpgkey': gpgkey,
        'provided_by': other_epel[0] if other_epel else (EPEL_REPO_ID if define else None),
        'changes': bool(define and not (current and current.get('baseurl') == url and current.get('gpgcheck') and
                                        current.get('gpgkey') == gpgkey and current.get('enabled', True))),
        'crb': {'id': crb or (crb_ids[0] if crb_ids else None), 'file': repos[crb]['file'] if crb else None,
                'enable': crb_enable, 'defined': crb is not None},
    }


def _wanted_packages(fam, os_facts, settings, version_change):
    """The driver packages (and, EL 8/9, the module stream) of the repo method."""
    key = (settings.get('package_set', 'full'), settings.get('module_type', 'open'))
    names = (EL_PACKAGES if fam == 'el' else APT_PACKAGES).get(key) or APT_PACKAGES[('full', key[1])]
    branch = str(settings['branch'])
    if fam != 'el' and key[0] == 'compute':
        names = apt_compute_packages(branch, key[1])
    version = settings.get('version') or ''
    streams = fam == 'el' and int(os_facts['distribution_major_version']) < 10
    if fam == 'el':
        if version:
            return ['{0}-{1}'.format(n, version) for n in names]
        if streams and not version_change:
            return list(names)
        return ['{0}-{1}.*'.format(n, branch) for n in names]
    if version_change:
        return ['{0}={1}'.format(n, version + '-*' if version else branch + '.*') for n in names]
    return list(names)


def driver_plan(facts, settings, node=None, stage='start', run=None, check_mode=False):
    """Everything the nvidia_driver role does on one node, decided from facts and settings.

    stage: 'start' (facts as gathered), 'installed' (after the driver and extras were installed: facts re-read),
    'rebooted' (after a reboot).  run: run_state's {start_version, installing (the driver packages changed, or are
    predicted to), modprobe: {rc, stdout, stderr}}.  ``settings['reboot_ok']`` is the permission resolved once
    (_plan_kernel.reboot_allowed).
    """
    node = node or {}
    run = run or {}
    os_facts = facts.get('os') or {}
    kernel_state = facts.get('kernel_state') or {}
    nvidia = facts.get('nvidia') or {}
    services = facts.get('services') or services_from_units(facts.get('units'))
    packages = node.get('packages') or {}
    fam = family_of(os_facts)
    branch = str(settings.get('branch', ''))
    exact = settings.get('version') or ''
    method = settings.get('method', 'repo')
    module_type = settings.get('module_type', 'open')

    open_reasons = open_required_reasons(kernel_state, nvidia, settings.get('open_required_device_ids') or [])
    refused = refusals(os_facts, settings, open_reasons, nvidia=nvidia, host=facts.get('host'))
    # Ubuntu's Canonical-signed driver (R25): which flavour the node has, and whether the source setting swaps it.
    ubuntu_found = _driver_ubuntu.flavour(packages)
    ubuntu_source = settings.get('source') == 'ubuntu'
    if not refused:
        refused = _driver_ubuntu.refusals(os_facts, settings, ubuntu_found)
    plan = {'family': fam, 'refusals': [m for _c, m in refused], 'refused': dict(refused),
            'open_required': bool(open_reasons),
            'open_required_reasons': open_reasons, 'warnings': [], 'blockers': []}
    if refused:
        return plan

    running = kernel_state.get('running') or os_facts.get('kernel') or ''
    boot = kernel_state.get('default') or running
    loaded = kernel_state.get('nvidia_module') or {'loaded': False}
    installed, installed_source = installed_driver_version(kernel_state, nvidia, packages, boot)
    dkms_version = dkms_version_for(kernel_state, boot)
    ubuntu = _driver_ubuntu.plan(settings, ubuntu_found, boot, node.get('apt_candidates')) if ubuntu_source \
        else None
    if ubuntu and ubuntu['modules_available'] is False:
        # Ubuntu's archive has no signed modules for the kernel that boots next (the gather's apt candidates): the
        # installation cannot succeed, and a reboot would bring the node up without its GPUs.
        msg = _driver_ubuntu.modules_error(facts.get('host'), boot, running, [ubuntu['modules_package']],
                                           role='nvidia_driver')
        plan.update({'refusals': [msg], 'refused': {'modules': msg}})
        return plan
    if ubuntu and ubuntu['version'] and installed_source in (None, 'nvidia-smi'):
        installed = ubuntu['version']
        installed_source = 'package ' + (ubuntu['version_package'] or ubuntu['driver_package'])
    if ubuntu and ubuntu['modules_installed']:
        # Canonical's prebuilt modules for the kernel that boots next stand where the DKMS build stands.
        dkms_version = installed
    smi_version = nvidia.get('driver_version') or ''
    start_version = run.get('start_version', installed) if stage != 'start' else installed
    version_change = bool(start_version) and not wanted_match(start_version, branch, exact)
    ok = bool(nvidia.get('present') and wanted_match(smi_version, branch, exact) and loaded.get('loaded') and
              loaded.get('version') == smi_version and loaded.get('flavour') == module_type and
              (boot == running or dkms_version == smi_version))
    installing = bool(run.get('installing'))
    plan.update({
        'source': 'ubuntu' if ubuntu_source else 'nvidia', 'flavour': ubuntu_found['flavour'], 'ubuntu': ubuntu,
        'running_kernel': running, 'boot_kernel': boot, 'loaded': loaded,
        'installed_version': installed, 'installed_source': installed_source, 'start_version': start_version,
        'version_change': version_change, 'ok': ok, 'stage': stage,
        'wanted': {'branch': branch, 'version': exact, 'module_type': module_type},
        'nouveau_loaded': bool((kernel_state.get('nouveau') or {}).get('loaded')),
    })

    # What the node runs: fabric manager (+ NVLSM through it on NVLink 5, R3), persistence, IMEX.
    fabric = nvswitch_fabric(kernel_state)
    fm_mode = settings.get('fabricmanager', 'auto')
    want_fm = fm_mode == 'always' or (fm_mode == 'auto' and fabric != 'none')
    nvlsm_mode = settings.get('nvlsm', 'auto')
    want_nvlsm = nvlsm_mode == 'always' or (nvlsm_mode == 'auto' and fabric == 'nvlink5')
    # R22: NVLink 5 monitors its NVSwitches with NVSDM instead of nscq (x86_64 only); nodeprep_nvidia_driver_nscq
    # asks for the NVSwitch library of the fabric.
    want_switch_lib = want_fm and bool(settings.get('nscq', True))
    want_nvsdm = want_switch_lib and fabric == 'nvlink5' and \
        (os_facts.get('architecture') or 'x86_64') in NVSDM_ARCHES
    want_nscq = want_switch_lib and fabric != 'nvlink5'
    plan['fabric'] = {'kind': fabric, 'fabricmanager': want_fm, 'nvlsm': want_nvlsm, 'nscq': want_nscq,
                      'nvsdm': want_nvsdm, 'nvlink5_packages': list(NVLINK5_PACKAGES) if want_nvlsm else [],
                      'ib_umad': want_nvlsm, 'ib_umad_conf': IB_UMAD_CONF, 'ib_umad_conf_content': IB_UMAD_CONF_TEXT,
                      'bridges': [b.get('ib_device') for b in (kernel_state.get('pci') or {}).get('nvlink5_bridges')
                                  or []]}

    # Repositories: NVIDIA's (key per EL version, R5), EPEL + CRB when dkms is needed (R4).
    need_repo = (method == 'repo' and not ok) or want_fm or want_nvlsm or bool(settings.get('imex'))
    if ubuntu_source:
        # Ubuntu's archive has the driver, fabric manager and NSCQ; NVLSM and IMEX come from NVIDIA's repository.
        need_repo = want_nvlsm or bool(settings.get('imex'))
    repo = _repo(os_facts, settings, node)
    repo['needed'] = need_repo
    plan['repo'] = repo
    needs_dkms = fam == 'el' and (not ok or bool(packages.get('dkms')))
    plan['epel'] = _epel(os_facts, settings, node, needs_dkms)
    if plan['epel']['needed'] and not plan['epel']['crb']['defined']:
        plan['warnings'].append('EPEL packages may need the {0} repository, which is not defined on this host '
                                '(RHEL: subscription-manager repos --enable {1}).'.format(
                                    'powertools' if os_facts.get('distribution_major_version') == '8' else 'crb',
                                    plan['epel']['crb']['id']))

    # Module streams (EL 8/9).
    streams = fam == 'el' and int(os_facts.get('distribution_major_version', 10)) < 10
    stream = '{0}-{1}'.format(branch, 'open' if module_type == 'open' else 'dkms')
    current_stream = node.get('module_stream') or ''
    plan['stream'] = {'use': streams and method == 'repo', 'wanted': stream, 'current': current_stream,
                      'reset': bool(streams and method == 'repo' and not ok and current_stream and
                                    current_stream != stream),
                      'enable': bool(streams and method == 'repo' and not ok and current_stream != stream)}

    # Driver packages.
    plan['install'] = {
        'needed': not ok,
        'packages': _wanted_packages(fam, os_facts, settings, version_change) if method == 'repo' else [],
        'allow_downgrade': True,
        'pinning_package': ('nvidia-driver-pinning-' + (exact or branch)) if fam == 'debian' else None,
        'unpin': (['nvidia-driver-pinning-' + start_version.split('.')[0], 'nvidia-driver-pinning-' + start_version]
                  if fam == 'debian' and version_change else []),
    }
    if ubuntu:
        # Ubuntu's driver and the Canonical-signed modules of the kernel that boots next; no pinning package (that is
        # NVIDIA's repository's), no DKMS.
        plan['install'].update({'packages': list(ubuntu['packages']), 'pinning_package': None, 'unpin': []})

    # Extras at exactly the driver's version (R1 names by branch).
    fm_version = installed if installed and wanted_match(installed, branch, exact) else ''
    fm_branch = fm_version.split('.')[0] if fm_version else branch
    # apt: persistenced and imex at the driver's version too; nvidia-driver-pinning-<branch> holds a branch, not the
    # installed version (R21).  EL 8/9: the module stream holds them.
    pin_version = fm_version if (fam == 'debian' or not streams) else ''
    extras = []
    if method == 'repo' and settings.get('persistenced', True):
        # Ubuntu's archive has nvidia-persistenced in nvidia-compute-utils-<branch>-server (R25).
        extras.append(('nvidia-compute-utils-{0}-server'.format(branch) if ubuntu else 'nvidia-persistenced',
                       '' if ubuntu else pin_version))
    if want_nvlsm:
        extras.append(('nvlsm', ''))
        extras.extend((name, '') for name in NVLINK5_PACKAGES)
    if settings.get('imex'):
        extras.append(('nvidia-imex', pin_version))
    metas = []
    if ubuntu:
        # The module meta package of each installed kernel flavour, so that a kernel installed outside the collection
        # (apt upgrade) comes with its signed modules; known once the gather read its apt candidate.
        metas = _driver_ubuntu.flavour_metas(settings, kernel_state.get('packages'), node.get('apt_candidates'),
                                             packages)
        extras.extend((meta['name'], '') for meta in metas if meta['installed'] or meta['available'])
        for meta in metas:
            if meta['available'] is False and not meta['installed']:
                plan['warnings'].append(
                    "Ubuntu's archive has no {0} (no apt candidate): a kernel of that flavour installed outside the "
                    'collection comes without its signed NVIDIA modules (the kernel role does not reboot into '
                    'it).'.format(meta['name']))
    if want_fm:
        extras.append((_driver_ubuntu.fabricmanager_package(fm_branch) if ubuntu else
                       fabricmanager_package(fam, fm_branch), fm_version))
    if want_nscq:
        extras.append((_driver_ubuntu.nscq_package(fm_branch) if ubuntu else nscq_package(fam, fm_branch),
                       fm_version))
    if want_nvsdm:
        extras.append((nvsdm_package(fam, fm_branch), fm_version))
    spec = (lambda _fam, name, version: _driver_ubuntu.package_spec(name, version)) if ubuntu else package_spec
    fm_names = fabric_package_names(fam)
    fm_wanted = [n for n, _v in extras if fm_names.match(n)]
    remove = []
    for name in sorted(packages):
        if not fm_names.match(name):
            continue
        for pkg in packages[name]:
            if name not in fm_wanted or not want_fm or (fm_version and pkg['version'] != fm_version) or \
                    (not fm_version and installing and version_change):
                if name not in remove:
                    remove.append(name)
    missing = []
    for name, version in extras:
        have = [p['version'] for p in packages.get(name) or []]
        if not have or (version and version not in have) or name in remove:
            missing.append(spec(fam, name, version))
    plan['ubuntu_metas'] = metas
    plan['extras'] = {
        'packages': [spec(fam, n, v) for n, v in extras],
        'missing': missing,
        'needed': bool(missing) or (bool(extras) and installing),
        'remove': remove,
        'unhold': [n for n in remove if n in (node.get('apt_holds') or [])] if fam == 'debian' else [],
        'hold': fm_wanted if fam == 'debian' else [],
        'version': fm_version,
        'version_known': bool(fm_version) or not (want_fm or want_nscq or want_nvsdm),
    }

    # Versionlock (EL, R9): exact NEVRAs of the installed packages at the driver's version, raw; stale ones removed.
    locklist = node.get('versionlock') or []
    ours = [e for e in locklist if not e.startswith('!') and lock_entry_name(e) and
            NVIDIA_STACK_RE.match(lock_entry_name(e))]
    lock_add = []
    lock_keep = []
    if fam == 'el' and method == 'repo' and installed and wanted_match(installed, branch, exact) and \
            not (installing and check_mode):
        for name in sorted(packages):
            if not NVIDIA_STACK_RE.match(name) or name in remove:
                continue
            for pkg in packages[name]:
                if pkg['version'] == installed:
                    entry = lock_entry(dict(pkg, name=name))
                    lock_keep.append(entry)
                    if entry not in locklist:
                        lock_add.append(entry)
    if stage == 'start' and not ok:
        # Before installing: only locks that would hold the node on another version go (a move).
        lock_remove = list(ours) if version_change else []
        lock_add = []
    elif check_mode and installing and version_change:
        # Check mode: the move's first step removed these locks only on paper; a real run finds none left here.
        lock_remove = []
    else:
        lock_remove = [e for e in ours if e not in lock_keep]
    plan['versionlock'] = {
        'use': fam == 'el' and method == 'repo',
        'plugin_present': bool(node.get('versionlock_plugin')),
        'plugin_package': 'python3-dnf-plugin-versionlock',
        'add': lock_add, 'remove': lock_remove,
        'unknown': bool(check_mode and fam == 'el' and method == 'repo' and (installing or not installed)),
    }

    # Services: no nvlsm unit of ours; the fabric manager starts NVLSM on NVLink 5 (R3).
    wanted_services = (['nvidia-fabricmanager'] if want_fm else []) + (['nvidia-imex'] if settings.get('imex') else [])
    present = units_present(services)
    wanted_units = (['nvidia-persistenced.service'] if settings.get('persistenced', True) else []) + \
        [s + '.service' for s in wanted_services]
    plan['services'] = wanted_services
    plan['units_missing'] = [u for u in wanted_units if u not in present]
    plan['persistence_conflicts'] = persistence_conflicts(services, settings.get('persistence_conflicting_units'))
    plan['persistenced'] = {
        'enable': bool(settings.get('persistenced', True)),
        'dropin': fam == 'debian' and method == 'repo' and bool(settings.get('persistenced', True)),
        'dropin_path': PERSISTENCED_DROPIN, 'dropin_content': PERSISTENCED_DROPIN_TEXT,
        'wants_link': PERSISTENCED_WANTS,
        'unit_path': '/usr/lib/systemd/system/nvidia-persistenced.service',
        'runfile_unit': method == 'runfile',
    }

    # Secure Boot (R13): an unsigned/unenrolled DKMS module is rejected at load; a reboot cannot fix that.
    secure = kernel_state.get('secure_boot') or {}
    mok = secure.get('dkms_mok') or {}
    modprobe = run.get('modprobe') or {}
    key_rejected = 'Key was rejected by service' in (modprobe.get('stderr') or '') or \
        'Key was rejected by service' in (modprobe.get('stdout') or '')
    needs_load = not ok and not (loaded.get('loaded') and loaded.get('version') == installed and
                                 loaded.get('flavour') == module_type)
    # Canonical signs Ubuntu's prebuilt modules (R25): no DKMS key to enrol there.
    if needs_load and (key_rejected or (secure.get('enabled') is True and mok.get('enrolled') is not True and
                                        stage != 'start' and not ubuntu)):
        path = mok.get('path') or '/var/lib/dkms/mok.pub'
        plan['blockers'].append(
            'nvidia_driver: Secure Boot is enabled ({0}) and the DKMS signing key {1} is {2}, so the kernel would '
            'reject the NVIDIA module{3}; a reboot cannot fix this, so the node is not rebooted. To fix: {4}.'.format(
                secure.get('source') or 'modprobe', path,
                'not enrolled' if mok.get('enrolled') is False else 'not known to be enrolled',
                ' (modprobe nvidia: Key was rejected by service)' if key_rejected else '',
                SECURE_BOOT_REMEDY.format(key='', path=path)))

    # R24: a reboot into a kernel the NVIDIA driver did not build for brings the node up without its GPUs.
    blocker = dkms_blocker(kernel_state, running, boot, method if not ubuntu else 'ubuntu', stage, check_mode,
                           packages)
    if blocker:
        plan['blockers'].append(blocker)

    # Reboot reasons (never one that a reboot cannot cure, R13).
    reasons = []
    if (kernel_state.get('nouveau') or {}).get('loaded'):
        reasons.append('nvidia_driver: nouveau is loaded (it is blacklisted and leaves at the next boot)')
    if loaded.get('loaded'):
        if installed and loaded.get('version') and loaded.get('version') != installed:
            reasons.append('nvidia_driver: the loaded NVIDIA module is {0}, the installed driver is {1}'.format(
                loaded.get('version'), installed))
        elif check_mode and installing and version_change:
            reasons.append('nvidia_driver: the loaded NVIDIA module {0} will differ from the driver being '
                           'installed'.format(loaded.get('version')))
        if loaded.get('flavour') not in (None, module_type):
            reasons.append('nvidia_driver: the loaded NVIDIA modules are {0}, {1} were asked for'.format(
                loaded.get('flavour'), module_type))
    elif boot != running:
        reasons.append('nvidia_driver: the driver is built for {0}, the kernel that boots next (running {1})'.format(
            boot, running))
    elif modprobe.get('rc') not in (None, 0) and not key_rejected:
        reasons.append('nvidia_driver: modprobe nvidia failed: ' + (modprobe.get('stderr') or '').strip())
    if plan['blockers']:
        reasons = [r for r in reasons if 'nouveau' in r]
    plan['reboot'] = {'why': reasons, 'needed': bool(reasons),
                      'allowed': bool(settings.get('reboot_ok')) and not plan['blockers']}
    plan['can_start'] = bool(check_mode or ((loaded.get('loaded') or modprobe.get('rc') == 0) and not reasons and
                                            not plan['blockers']))
    plan['load'] = {'modprobe': not loaded.get('loaded') and not reasons and not plan['blockers'] and not ok,
                    'dkms_build': method == 'repo' and boot != running and not dkms_version and not ubuntu}

    # Check mode: what cannot be asked of dnf/apt/systemd before the repository, packages or units exist, and is
    # therefore predicted as changed.  A real run on the same node changes exactly these.
    repo_unknown = bool(check_mode and (repo['changes'] and need_repo or plan['epel']['changes'] or
                                        plan['stream']['enable'] or bool(lock_remove)))
    plan['predict'] = {
        'packages': repo_unknown,
        # A missing extra is predicted too: apt's check mode "installs" it, and the hold after it finds no package.
        # Ubuntu's modules for another kernel (no version change) leave the extras as they are.
        'extras': bool(check_mode and (repo_unknown or (installing and not (ubuntu and not version_change)) or
                                       remove or bool(missing) or
                                       ((want_fm or want_nscq or want_nvsdm) and not fm_version))),
        'versionlock': plan['versionlock']['unknown'] or bool(check_mode and plan['extras']['needed']),
        'units': [u[:-len('.service')] for u in plan['units_missing']] + (
            ['nvidia-fabricmanager'] if check_mode and want_fm and remove else []),
    }
    # Check mode: an installed driver that is not loaded yet (nouveau holds the GPUs) is loaded by this run's modprobe
    # or reboot, so the settings roles predict from the driver's defaults, as after an installation.
    plan['check_mode_loads'] = bool(check_mode and not ok and not plan['blockers'] and (
        plan['load']['modprobe'] or (plan['reboot']['needed'] and plan['reboot']['allowed'])))
    initramfs = {'el': (['dracut', '--force', '--kver', boot], '/usr/bin/dracut'),
                 'debian': (['update-initramfs', '-u', '-k', boot], '/usr/sbin/update-initramfs')}[fam]
    plan['initramfs'] = {'argv': initramfs[0], 'tool': initramfs[1]}
    plan['runfile'] = {
        'path': '/var/cache/nodeprep/NVIDIA-Linux-{0}-{1}.run'.format(os_facts.get('architecture', 'x86_64'), exact),
        'packages': ['gcc', 'make', 'dkms', 'elfutils-libelf-devel'] if fam == 'el' else ['build-essential', 'dkms'],
    }
    plan['runfile']['argv'] = ['sh', plan['runfile']['path'], '--silent', '--dkms',
                               '--kernel-module-type=' + module_type, '--no-opengl-files', '--kernel-name=' + boot,
                               '--kernel-source-path=/lib/modules/{0}/build'.format(boot)]
    return plan


def dkms_blocker(kernel_state, running, boot, method, stage, check_mode, packages=None):
    """After the build for the kernel that boots next (stage 'installed', a real run): the message that stops the
    role before a reboot when an NVIDIA DKMS module is not ``installed`` for that kernel (R24, _dkms.needed_for),
    with the make.log's last lines, or when ``dkms status`` lists no NVIDIA module although the node has one
    (_dkms.unknown_state, ``packages`` the installed ones); '' otherwise.  The kernel role's plan keeps the running
    kernel as the default boot entry (_plan_kernel.dkms_plan); this role does not change the boot loader."""
    # Imported here: _dkms takes the module names from this module (their one home).
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _dkms
    if method != 'repo' or stage != 'installed' or check_mode or not boot or boot == running:
        return ''
    unknown = _dkms.unknown_state(kernel_state, packages)
    if unknown:
        return _dkms.unknown_error('', boot, running, unknown, False, role='nvidia_driver')
    entries = kernel_state.get('dkms') or []
    _needed, missing = _dkms.needed_for(entries, running, boot)
    if not _dkms.registered(entries) or not missing:
        return ''
    failed = _dkms.failed_builds(missing, kernel_state.get('dkms_logs'), boot)
    return _dkms.build_error('', boot, running, missing, failed, False, role='nvidia_driver')


# The stages of a run of the role: its start (the facts as gathered), after the installation (facts read again),
# after the reboot.
STAGES = ('start', 'installed', 'rebooted')


def _flag(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ('true', 'yes', 'on', '1')


def run_state(run):
    """What this run of the role did so far, as its later stages hand it to node_plan (``run: {nvidia_driver: ...}``)
    and driver_plan reads it: ``stage`` (one of STAGES, default start), ``start_version`` (the driver when the role
    began), ``installing`` (the driver packages changed, or check mode predicted that they do), ``modprobe`` (``rc``,
    ``stdout``, ``stderr`` of ``modprobe nvidia``; empty when it did not run; may be the registered result of the
    command as it is, skipped or not), ``files`` (the paths the role wrote in this run) and ``initramfs`` (the
    initramfs was rebuilt in this run).  ValueError names a stage that is not one of STAGES."""
    run = run if isinstance(run, dict) else {}
    stage = str(run.get('stage') or 'start')
    if stage not in STAGES:
        raise ValueError('run.stage={0!r}: allowed {1}'.format(stage, ', '.join(STAGES)))
    modprobe = run.get('modprobe') if isinstance(run.get('modprobe'), dict) else {}
    if isinstance(modprobe.get('results'), list):
        # The registered result of a loop: the one modprobe that ran, if any.
        ran = [item for item in modprobe['results'] if isinstance(item, dict) and item.get('rc') is not None]
        modprobe = ran[0] if ran else {}
    out = {'stage': stage, 'start_version': str(run.get('start_version') or ''),
           'installing': _flag(run.get('installing')), 'modprobe': {},
           'files': [str(path) for path in run.get('files') or []], 'initramfs': _flag(run.get('initramfs'))}
    if modprobe.get('rc') is not None:
        out['modprobe'] = {'rc': int(modprobe['rc']), 'stdout': str(modprobe.get('stdout') or ''),
                           'stderr': str(modprobe.get('stderr') or '')}
    return out


# ----------------------------------------------------------------------------------------------------- the no-op

def services_from_units(units):
    """The service_facts shape the plan reads ({name.service: {name, state, status, source}}) from the units the
    gather read (gpu_node_facts units: {name.service: {load, active, sub, enabled, ...}})."""
    services = {}
    for name, unit in (units or {}).items():
        unit = unit or {}
        if unit.get('load') == 'not-found':
            status = 'not-found'
        else:
            status = unit.get('enabled') or 'unknown'
        services[name] = {'name': name, 'source': 'systemd', 'status': status,
                          'state': 'running' if unit.get('sub') == 'running' else 'stopped'}
    return services


def _sha1(text):
    # SHA-1 because the gather reports files by it (gpu_node_facts files); it identifies content only.
    return hashlib.sha1(text.encode('utf-8')).hexdigest()  # nosec B324


def _file_is(files, path, content=None, mode='0644', kind='file', target=None):
    """True when the gathered file state shows ``path`` exactly as the role's file/copy task writes it (root-owned)."""
    state = (files or {}).get(path)
    if not state or not state.get('exists') or state.get('type') != kind:
        return False
    if kind == 'link':
        return state.get('target') == target
    if state.get('mode') != mode or state.get('uid') != 0 or state.get('gid') != 0:
        return False
    return content is None or state.get('sha1') == _sha1(content)


def _unit_is(units, name, enabled, active):
    """True when the gathered unit state shows ``name`` enabled (when asked) and running (when asked)."""
    unit = (units or {}).get(name if '.' in name else name + '.service')
    if not unit or unit.get('load') != 'loaded':
        return False
    if enabled and unit.get('enabled') != 'enabled':
        return False
    return not active or unit.get('active') == 'active'


# The readiness checks of the role (_plan_nvidia_driver.CHECKS) each piece of work belongs to.
LOADED, NOUVEAU, PERSISTENCED, FABRIC = 'driver.loaded', 'driver.nouveau_blacklisted', 'driver.persistenced', \
    'fabric.manager'
OPEN_MODULES = 'driver.open_modules'


def _extras_check(names):
    """The check a list of extra packages belongs to: nvidia-persistenced (Ubuntu: nvidia-compute-utils) is
    driver.persistenced's, Ubuntu's module meta packages (the driver of later kernels) driver.loaded's, the fabric
    manager, its switch library, NVLSM and IMEX are fabric.manager's."""
    persistence = [n for n in names if re.match(r'^(nvidia-persistenced|nvidia-compute-utils)', n)]
    modules = [n for n in names if n.startswith('linux-modules-nvidia-')]
    if names and len(persistence) == len(names):
        return PERSISTENCED
    if modules and len(modules) + len(persistence) == len(names):
        return LOADED
    return FABRIC


def _reboot_check(reason):
    if 'nouveau' in reason:
        return NOUVEAU
    if 'modules are' in reason:
        return OPEN_MODULES
    return LOADED


def _not_ok(plan, nvidia):
    """(check, level, msg) of a driver that is not as wanted: modules of the other type are driver.open_modules'
    (the plan reboots into the wanted ones); the wanted driver loaded but not built for the kernel that boots next
    warns driver.loaded (a reboot would bring the node up without its GPUs; the role builds it); anything else fails
    driver.loaded."""
    loaded = plan.get('loaded') or {}
    wanted = plan.get('wanted') or {}
    msg = 'driver: not the wanted driver, or not loaded'
    if loaded.get('loaded') and loaded.get('flavour') not in (None, wanted.get('module_type')):
        return OPEN_MODULES, msg
    if loaded.get('loaded') and loaded.get('version') == plan.get('installed_version') and \
            wanted_match(loaded.get('version'), wanted.get('branch'), wanted.get('version')) and \
            not plan.get('load', {}).get('dkms_build') and not plan.get('reboot', {}).get('why') and \
            not plan.get('blockers') and plan.get('boot_kernel') == plan.get('running_kernel'):
        # The wanted module is loaded and built: only nvidia-smi does not answer, which no run of the role changes
        # (readiness says it: driver.loaded's own health, gpu.count).
        return None
    smi = nvidia.get('driver_version')
    if loaded.get('loaded') and loaded.get('version') == smi and \
            wanted_match(smi, wanted.get('branch'), wanted.get('version')) and \
            plan.get('boot_kernel') != plan.get('running_kernel'):
        return LOADED, msg, 'warn'
    return LOADED, msg


def driver_due(plan, nvidia):
    """Whether the driver itself is work of the role (installed, built, loaded or rebooted into): not as wanted,
    for a reason a run of the role changes."""
    return not plan.get('ok') and _not_ok(plan, nvidia) is not None


def work_items(plan, facts, settings, units=None, files=None):
    """Why the nvidia_driver role must run its tasks on this node, each as ``(check, level, msg)``: the readiness
    check of the role that the work belongs to (the check fails, or warns at level 'warn', while the work is due), and
    the words.  [] when the plan, the unit states and the file states show that every task would change nothing.
    Anything the facts cannot tell (units or files not gathered) counts as work.  ``settings`` also reads
    blacklist_nouveau and persistence_conflicts (the mode).

    The package repositories are work only when the role installs from them: a repository that differs on a node
    whose driver and extras are installed is no readiness matter, and is left alone."""
    kernel_state = facts.get('kernel_state') or {}
    nvidia = facts.get('nvidia') or {}
    work = []

    def add(check, msg, level='fail'):
        work.append((check, level, msg))

    if plan.get('refusals'):
        return [(LOADED, 'fail', 'refused: ' + '; '.join(plan['refusals']))]
    extras = plan['extras']
    due = driver_due(plan, nvidia)
    installs = due or bool(extras.get('missing')) or not extras.get('version_known')
    if due:
        add(*_not_ok(plan, nvidia))
    for reason in plan.get('reboot', {}).get('why') or []:
        add(_reboot_check(reason), 'reboot: ' + reason)
    if plan.get('blockers') and not plan.get('reboot', {}).get('why'):
        add(LOADED, 'reboot: ' + '; '.join(plan['blockers']))
    if settings.get('blacklist_nouveau', True) and not (kernel_state.get('nouveau') or {}).get('blacklisted'):
        add(NOUVEAU, 'nouveau: not blacklisted')
    repo_check = _not_ok(plan, nvidia)[0] if due else _extras_check(extras.get('missing') or [])
    if installs and plan['repo'].get('needed') and plan['repo'].get('changes'):
        add(repo_check, 'repository: missing or different')
    if installs and plan['epel'].get('needed') and plan['epel'].get('changes'):
        add(repo_check, 'EPEL: missing or different')
    if plan['stream'].get('enable') or plan['stream'].get('reset'):
        add(LOADED, 'module stream: ' + plan['stream'].get('wanted', ''))
    # Extras at a version other than the loaded driver's follow a driver that is installed and not loaded yet: that
    # is driver.loaded's (a reboot loads it), not the fabric manager's, which matches the loaded driver.
    moving = bool(extras.get('version')) and extras.get('version') != nvidia.get('driver_version')
    if extras.get('needed') or extras.get('remove') or extras.get('unhold') or not extras.get('version_known'):
        names = extras.get('missing') or extras.get('remove')
        add(LOADED if not extras.get('version_known') or (moving and extras.get('missing')) else
            _extras_check(names or []), 'extras: ' + ', '.join(names or ['version unknown']))
    holds = kernel_state.get('driver_node') or {}
    if [h for h in extras.get('hold') or [] if h not in (holds.get('apt_holds') or [])]:
        add(FABRIC, 'apt holds: missing', 'warn')
    lock = plan['versionlock']
    if lock.get('use') and (not lock.get('plugin_present') or lock.get('add') or lock.get('remove')):
        # Locks left by the fabric manager packages the role removes are the fabric manager's.
        removed = extras.get('remove') or []
        stale_fabric = lock.get('plugin_present') and not lock.get('add') and lock.get('remove') and all(
            lock_entry_name(entry) in removed for entry in lock['remove'])
        add(FABRIC if stale_fabric else LOADED, 'versionlock: plugin or entries missing, or stale entries', 'warn')
    conflicts_mode = settings.get('persistence_conflicts', 'disable')
    if plan.get('persistence_conflicts') and conflicts_mode in ('disable', 'fail'):
        add(PERSISTENCED, 'persistence conflicts: ' + ', '.join(plan['persistence_conflicts']))
    persist = plan['persistenced']
    if persist.get('enable'):
        if persist.get('runfile_unit') and not _file_is(files, RUNFILE_UNIT, RUNFILE_UNIT_TEXT):
            add(PERSISTENCED, 'nvidia-persistenced: the runfile unit {0} missing or different'.format(RUNFILE_UNIT))
        if persist.get('dropin') and not (
                _file_is(files, persist['dropin_path'].rsplit('/', 1)[0], mode='0755', kind='directory') and
                _file_is(files, persist['dropin_path'], persist['dropin_content']) and
                _file_is(files, persist['wants_link'], kind='link', target=persist['unit_path'])):
            add(PERSISTENCED, 'nvidia-persistenced: drop-in or wants link missing or different')
        if not _unit_is(units, 'nvidia-persistenced', not persist.get('dropin'), plan.get('can_start')):
            add(PERSISTENCED, 'nvidia-persistenced: not enabled and running')
    for name in plan.get('services') or []:
        if not _unit_is(units, name, True, plan.get('can_start')):
            add(FABRIC, '{0}: not enabled and running'.format(name))
    fabric = plan['fabric']
    if fabric.get('ib_umad') and not _file_is(files, fabric['ib_umad_conf'], fabric['ib_umad_conf_content']):
        add(FABRIC, 'ib_umad: {0} missing or different'.format(fabric['ib_umad_conf']))
    # A GPU missing from nvidia-smi is no work: no run of the role brings it back (readiness gpu.count says it, and
    # the role's last task fails on it after its work, nodeprep_nvidia_driver_verify).
    return work


def driver_work(plan, facts, settings, units=None, files=None):
    """The words of work_items: why the role must run its tasks on this node ([] when nothing would change)."""
    return [msg for _check, _level, msg in work_items(plan, facts, settings, units, files)]
