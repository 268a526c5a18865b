# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What the NVIDIA driver plan reads on the node besides the kernel facts: the repositories, the installed NVIDIA
packages, the versionlock list and plugin, the dnf module stream, the apt source, keyring and holds.

One reader, called by the kernel facts collector (so the first gather of
site.yml carries it as ``kernel_state.driver_node`` and the plan can be computed on the controller).  The parsers are
the pure functions of rules/_driver.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._driver_packages import (
    keep_package,
    parse_module_file,
    parse_repo_files,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._packages import PackagesError, read_packages

# The installed kernel packages the kernel role's plan reads (_kernel_state.kernel_packages), from the same package list:
# EL kernel / kernel-core and the ELRepo kernel-lt / kernel-ml ones, Debian/Ubuntu linux-image / linux-headers and
# the linux-generic meta packages.
KERNEL_PACKAGE_RE = re.compile(r'^(kernel(-lt|-ml)?(-core|-devel)?|linux-(image|headers|generic)(-.+)?)$')


class DriverNodeError(Exception):
    """The package database could not be read."""


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


def read_driver_node(module, family):
    """{repos, versionlock, versionlock_plugin, module_stream, packages, kernel_packages} (EL) or
    {apt_sources_content, apt_keyring_present, apt_holds, packages, kernel_packages} (Debian family); {'packages': {},
    'kernel_packages': {}} elsewhere.  The installed packages come from the collection's one package reader
    (_packages.read_packages: rpm -qa / dpkg-query -W).  Raises DriverNodeError when the package database cannot be
    read."""
    node = {}
    if family == 'el':
        files = {}
        for path in glob.glob('/etc/yum.repos.d/*.repo'):
            text = _read(path)
            if text is not None:
                files[path] = text
        node['repos'] = parse_repo_files(files)
        node['versionlock'] = [line.strip() for line in (_read('/etc/dnf/plugins/versionlock.list') or '').splitlines()
                               if line.strip() and not line.startswith('#')]
        node['versionlock_plugin'] = os.path.exists('/etc/dnf/plugins/versionlock.conf')
        node['module_stream'] = parse_module_file(_read('/etc/dnf/modules.d/nvidia-driver.module'))
    elif family == 'debian':
        node['apt_sources_content'] = _read('/etc/apt/sources.list.d/nodeprep-cuda.sources')
        node['apt_keyring_present'] = os.path.exists('/etc/apt/keyrings/nodeprep-cuda.asc')
    else:
        node['packages'] = {}
        node['kernel_packages'] = {}
        return node
    try:
        dummy, packages, holds = read_packages(module, family=family)
    except PackagesError as exc:
        raise DriverNodeError(str(exc))
    if family == 'debian':
        node['apt_holds'] = holds
    node['packages'] = dict((k, v) for k, v in packages.items() if keep_package(k))
    node['kernel_packages'] = dict((k, v) for k, v in packages.items() if KERNEL_PACKAGE_RE.match(k))
    return node
