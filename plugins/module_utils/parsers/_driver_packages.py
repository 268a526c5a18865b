# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The NVIDIA driver's packages and repositories as the node shows them: the package family of the OS, the
installed packages the driver plan looks at, /etc/yum.repos.d/*.repo and the dnf module stream file.

The collector that reads them is collect/_driver_node.py; the driver's rules (rules/_driver.py) import these back.
Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# CUDA repository signing keys (R5): rhel8/rhel9 D42D0685, rhel10 CDF6BA43, Debian/Ubuntu 3bf863cc.
CUDA_EL_KEYS = {'8': 'D42D0685.pub', '9': 'D42D0685.pub', '10': 'CDF6BA43.pub'}

# Installed packages whose version is the driver's (the versionlock holds exactly these, R9).
# libnvsdm(-<branch>): NVSDM is versioned and locked with the driver (R22; dnf versionlock add libnvsdm).
NVIDIA_STACK_RE = re.compile(r'^(nvidia-|kmod-nvidia|libnvidia-|cuda-drivers|libnvsdm(-\d{3})?$)')


def family_of(os_facts):
    """'el', 'debian' or 'unsupported' from ansible's os_family and major version."""
    fam = os_facts.get('os_family')
    major = str(os_facts.get('distribution_major_version', ''))
    if fam == 'RedHat' and major in CUDA_EL_KEYS:
        return 'el'
    if fam == 'Debian':
        return 'debian'
    return 'unsupported'


# R22: what NVIDIA's driver container installs with nvlsm on NVLink 5 (nvlink5_pkgs_install()): the fabric manager's
# start script needs ibstat to find the SW_MNG port.  A distribution package, not versioned with the driver.
NVLINK5_PACKAGES = ('infiniband-diags',)


# ----------------------------------------------------------------------------------------------------- node readers

def parse_repo_files(files):
    """{repo id: {baseurl, enabled, gpgcheck, gpgkey, file}} from {path: text} of /etc/yum.repos.d/*.repo."""
    repos = {}
    for path in sorted(files):
        section = None
        for raw in files[path].splitlines():
            line = raw.strip()
            if not line or line.startswith(('#', ';')):
                continue
            if line.startswith('[') and line.endswith(']'):
                section = line[1:-1].strip()
                repos[section] = {'file': path, 'enabled': True, 'gpgcheck': False, 'baseurl': None, 'gpgkey': None}
                continue
            if section is None or '=' not in line:
                continue
            key, value = [p.strip() for p in line.split('=', 1)]
            if key in ('enabled', 'gpgcheck'):
                repos[section][key] = value.lower() in ('1', 'true', 'yes')
            elif key in ('baseurl', 'gpgkey'):
                repos[section][key] = value
    return repos


def parse_module_file(text):
    """The enabled stream of /etc/dnf/modules.d/nvidia-driver.module, '' when none."""
    stream = ''
    enabled = False
    for line in (text or '').splitlines():
        key, _sep, value = line.partition('=')
        if key.strip() == 'stream':
            stream = value.strip()
        if key.strip() == 'state' and value.strip() == 'enabled':
            enabled = True
    return stream if enabled else ''


def keep_package(name):
    """Installed packages the plan looks at (the module drops the rest of rpm -qa / dpkg-query)."""
    extra = ('nvlsm', 'dkms', 'epel-release', 'python3-dnf-plugin-versionlock') + NVLINK5_PACKAGES
    # DCGM 3.x is one package without a generation in its name (the dcgm role replaces or refuses it).
    extra += ('datacenter-gpu-manager',)
    # Ubuntu's Canonical-signed modules (R25): linux-modules-nvidia-<branch>-server[-open]-<kernel> and the metas.
    # NVIDIA DCGM (the dcgm role's plan reads them here: this list is read with the node's own package manager).
    # The perf_tools role's build packages (plans/_plan_perf_tools.package_names): CUDA toolkit parts, NCCL, the
    # compiler, make, CMake and Boost.
    extra += ('make', 'cmake', 'gcc-c++', 'g++', 'boost-devel', 'boost-static', 'libboost-program-options-dev')
    return bool(NVIDIA_STACK_RE.match(name) or name in extra or name.startswith('linux-modules-nvidia-')
                or name.startswith(('datacenter-gpu-manager-', 'cuda-nvcc-', 'cuda-cudart-dev', 'cuda-driver-dev',
                                    'cuda-nvml-dev', 'libnccl')))


# ----------------------------------------------------------------------------------------------------- Ubuntu's modules

# Ubuntu's Canonical-signed NVIDIA modules (R25; source linux-restricted-modules): per kernel ABI
# linux-modules-nvidia-<branch>[-server][-open]-<kernel> (the kernel part starts with a digit: 6.8.0-60-generic), and
# per kernel flavour the meta package linux-modules-nvidia-<branch>[-server][-open]-<flavour> (generic,
# generic-hwe-24.04, aws, ...) that follows the flavour's newest kernel.  ubuntu-drivers names the meta from the
# kernel image meta package installed (linux-image-<flavour>; linux-image-virtual counts as generic):
# canonical/ubuntu-drivers-common UbuntuDrivers/detect.py get_linux_modules_metapackage.
UBUNTU_MODULES_RE = re.compile(
    r'^(?P<prefix>linux-modules-nvidia-(?P<branch>\d{3})(?P<server>-server)?(?P<open>-open)?-)(?P<kernel>\d.*)$')
UBUNTU_MODULES_META_RE = re.compile(
    r'^(?P<prefix>linux-modules-nvidia-(?P<branch>\d{3})(?P<server>-server)?(?P<open>-open)?-)(?P<flavour>[a-z].*)$')
# Kernel image meta packages: linux-image-<flavour>, not an ABI package (linux-image-6.8.0-60-generic) nor the
# unsigned or extra images.
IMAGE_META_RE = re.compile(r'^linux-image-(?!unsigned-|extra-)(?P<flavour>[a-z][a-z0-9.+-]*)$')
# ubuntu-drivers: "virtual" kernels take the generic modules.
IMAGE_META_FLAVOURS = {'virtual': 'generic'}


def modules_prefixes(packages):
    """The ``linux-modules-nvidia-<branch>[-server][-open]-`` prefixes of the Ubuntu module packages installed
    (per-kernel or meta), sorted."""
    found = set()
    for name in packages or {}:
        if not (packages or {})[name]:
            continue
        match = UBUNTU_MODULES_RE.match(name) or UBUNTU_MODULES_META_RE.match(name)
        if match:
            found.add(match.group('prefix'))
    return sorted(found)


def image_meta_flavours(kernel_packages):
    """The kernel flavours whose image meta package is installed (``linux-image-generic`` -> generic,
    ``linux-image-generic-hwe-24.04`` -> generic-hwe-24.04, ``linux-image-virtual`` -> generic), sorted; from the
    gather's kernel packages (``{name: [versions]}`` or the package records)."""
    out = set()
    for name in kernel_packages or {}:
        match = IMAGE_META_RE.match(name)
        if match and (kernel_packages or {})[name]:
            flavour = match.group('flavour')
            out.add(IMAGE_META_FLAVOURS.get(flavour, flavour))
    return sorted(out)


def modules_queries(packages, kernels, flavours):
    """The Ubuntu module packages whose apt candidate the gather reads (apt-cache policy): for each installed
    prefix (modules_prefixes), the per-kernel package of each of ``kernels`` and the meta package of each of
    ``flavours``; [] when no Ubuntu module package is installed."""
    names = []
    for prefix in modules_prefixes(packages):
        for part in list(kernels or []) + list(flavours or []):
            if part and prefix + part not in names:
                names.append(prefix + part)
    return names


def parse_apt_policy(text):
    """``{name: {'installed': version | None, 'candidate': version | None}}`` from ``apt-cache policy <names>``
    (LC_ALL=C): a ``<name>:`` line, then ``  Installed: <v>`` and ``  Candidate: <v>``, ``(none)`` for none.  apt
    prints nothing for a name it does not know: such a name is absent."""
    out = {}
    name = None
    for line in (text or '').splitlines():
        if line and not line.startswith(' ') and line.rstrip().endswith(':'):
            name = line.rstrip()[:-1]
            out[name] = {'installed': None, 'candidate': None}
            continue
        if name is None:
            continue
        key, _sep, value = line.strip().partition(':')
        value = value.strip()
        if key in ('Installed', 'Candidate'):
            out[name][key.lower()] = None if value in ('', '(none)') else value
    return out
