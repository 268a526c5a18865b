# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Ubuntu's own NVIDIA driver flavour (REALITY R25): Canonical-signed, prebuilt kernel modules, no DKMS.

Ubuntu's archive ships the data-centre driver as ``nvidia-driver-<branch>-server[-open]`` (source
nvidia-graphics-drivers-<branch>-server, versions ``<driver>-0ubuntu0.<release>.<n>``) and, per kernel ABI, the
Canonical-signed modules ``linux-modules-nvidia-<branch>-server[-open]-<kernel>`` (source linux-restricted-modules,
versioned like the kernel), pulled for every new kernel by the meta package
``linux-modules-nvidia-<branch>-server[-open]-<flavour>`` (generic, generic-hwe-24.04, ...).  Its fabric manager and
NSCQ keep the branch in their names: ``nvidia-fabricmanager-<branch>`` (which provides the virtual
``nvidia-fabricmanager``) and ``libnvidia-nscq-<branch>``.  NVIDIA's repository names (nvidia-open,
nvidia-dkms-open, cuda-drivers) are the other flavour.

``flavour(packages)`` tells which flavour the installed packages are (from the package list the driver plan
gathered, _driver_node.read_driver_node); ``refusals(os_facts, settings, found)`` says when a setting would swap one
flavour for the other; ``plan(settings, found, boot)`` is what ``nodeprep_nvidia_driver_source: ubuntu`` installs.
_driver_plan.driver_plan calls them.  Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

SOURCES = ('nvidia', 'ubuntu')

# Ubuntu's driver packages (the -server series of the archive).
UBUNTU_DRIVER_RE = re.compile(
    r'^(nvidia-driver|nvidia-headless-no-dkms|nvidia-headless|nvidia-utils|nvidia-compute-utils|'
    r'nvidia-kernel-common|libnvidia-compute)-(?P<branch>\d{3})-server(?P<open>-open)?$')
# The per-kernel module packages: the kernel part starts with a digit (6.8.0-60-generic); the meta packages end in a
# flavour name (generic, generic-hwe-24.04, generic-6.8).  Only Ubuntu's archive has linux-modules-nvidia-*.
UBUNTU_MODULES_RE = re.compile(
    r'^linux-modules-nvidia-(?P<branch>\d{3})(?P<server>-server)?(?P<open>-open)?-(?P<kernel>\d.*)$')
UBUNTU_MODULES_META_RE = re.compile(
    r'^linux-modules-nvidia-(?P<branch>\d{3})(?P<server>-server)?(?P<open>-open)?-(?P<flavour>[a-z].*)$')
# NVIDIA's repository driver: its meta packages and its DKMS packages (nvidia-dkms-<B>[-open] up to 580,
# nvidia-dkms[-open] from 590; Ubuntu's are nvidia-dkms-<B>-server[-open]).  The pinning packages are apt preferences,
# not a driver: one left by an earlier run does not make the node NVIDIA's.
NVIDIA_REPO_RE = re.compile(r'^(nvidia-open|cuda-drivers|nvidia-dkms(-\d{3})?(-open)?)$')

# What the ubuntu source installs: the driver meta package of the archive and the modules for the boot kernel.
DRIVER_PACKAGE = 'nvidia-driver-{branch}-server{open}'
MODULES_PACKAGE = 'linux-modules-nvidia-{branch}-server{open}-{kernel}'
FABRICMANAGER_PACKAGE = 'nvidia-fabricmanager-{branch}'
NSCQ_PACKAGE = 'libnvidia-nscq-{branch}'
VERSION_PACKAGES = ('nvidia-kernel-common-{branch}-server', 'nvidia-driver-{branch}-server-open',
                    'nvidia-driver-{branch}-server', 'nvidia-utils-{branch}-server')


def flavour(packages):
    """Which driver flavour the installed packages are: {flavour: 'ubuntu' | 'nvidia' | 'both' | 'none',
    ubuntu_packages, nvidia_packages (sorted names), branch (of Ubuntu's packages, '' when none), open (Ubuntu's
    modules are the open ones), modules ({kernel: package} of the per-kernel module packages), meta (module meta
    packages), version (Ubuntu's driver version, '' when none)}."""
    packages = packages or {}
    ubuntu = []
    nvidia = []
    modules = {}
    meta = []
    branches = []
    opened = []
    for name in sorted(packages):
        if not packages[name]:
            continue
        match = UBUNTU_MODULES_RE.match(name)
        meta_match = UBUNTU_MODULES_META_RE.match(name)
        driver = UBUNTU_DRIVER_RE.match(name)
        if match:
            modules[match.group('kernel')] = name
        elif meta_match:
            meta.append(name)
        found = match or meta_match or driver
        if found:
            ubuntu.append(name)
            branches.append(found.group('branch'))
            opened.append(bool(found.group('open')))
        elif NVIDIA_REPO_RE.match(name):
            nvidia.append(name)
    branch = max(branches) if branches else ''
    version = ''
    for pattern in VERSION_PACKAGES:
        records = packages.get(pattern.format(branch=branch)) or []
        if branch and records:
            version = records[-1]['version']
            break
    kind = 'both' if ubuntu and nvidia else 'ubuntu' if ubuntu else 'nvidia' if nvidia else 'none'
    return {'flavour': kind, 'ubuntu_packages': ubuntu, 'nvidia_packages': nvidia, 'branch': branch,
            'open': any(opened) or not opened, 'modules': modules, 'meta': meta, 'version': version}


def _names(names, most=4):
    shown = list(names[:most])
    if len(names) > most:
        shown.append('and {0} more'.format(len(names) - most))
    return ', '.join(shown)


def refusals(os_facts, settings, found):
    """[(check, message)] when the source setting cannot be used on this node (check 'source') or would swap the
    installed flavour for the other one (check 'flavour'); each message names both flavours."""
    source = settings.get('source') or 'nvidia'
    branch = str(settings.get('branch', ''))
    open_part = '-open' if settings.get('module_type', 'open') == 'open' else ''
    ubuntu_names = 'nvidia-driver-{0}-server{1} with linux-modules-nvidia-{0}-server{1}-<kernel>'.format(
        branch, open_part)
    out = []
    if source == 'ubuntu' and os_facts.get('distribution') != 'Ubuntu':
        out.append(('source', (
            "nodeprep_nvidia_driver_source=ubuntu installs Ubuntu's Canonical-signed driver ({0}), which only "
            "Ubuntu's archive has; this host runs {1} {2}. Allowed here: nvidia (NVIDIA's repository).").format(
                ubuntu_names, os_facts.get('distribution'), os_facts.get('distribution_version'))))
        return out
    if source == 'ubuntu' and settings.get('method', 'repo') != 'repo':
        out.append(('source', (
            "nodeprep_nvidia_driver_source=ubuntu installs Ubuntu's Canonical-signed driver packages; "
            'nodeprep_nvidia_driver_method={0} cannot install them. Allowed with source ubuntu: method repo.').format(
                settings.get('method'))))
        return out
    if source == 'ubuntu' and settings.get('package_set', 'full') != 'full':
        out.append(('source', (
            "nodeprep_nvidia_driver_source=ubuntu installs Ubuntu's driver meta package ({0}); "
            'nodeprep_nvidia_driver_package_set={1} is not offered with it. Allowed with source ubuntu: '
            'full.').format(ubuntu_names, settings.get('package_set'))))
        return out
    kind = found.get('flavour')
    if source == 'nvidia' and kind in ('ubuntu', 'both'):
        out.append(('flavour', (
            "this node runs Ubuntu's Canonical-signed NVIDIA driver (installed: {0}); "
            "nodeprep_nvidia_driver_source=nvidia would install NVIDIA's repository packages (nvidia-open with "
            'nvidia-dkms-open, built by DKMS and not signed by Canonical) over it. Allowed: '
            "nodeprep_nvidia_driver_source=ubuntu keeps Ubuntu's signed driver ({1} for the kernel that boots "
            "next); to move to NVIDIA's driver, remove Ubuntu's driver packages first.").format(
                _names(found['ubuntu_packages']), ubuntu_names)))
    elif source == 'ubuntu' and kind in ('nvidia', 'both'):
        out.append(('flavour', (
            "this node runs NVIDIA's driver from NVIDIA's repository (installed: {0}); "
            "nodeprep_nvidia_driver_source=ubuntu would install Ubuntu's Canonical-signed driver ({1}) over it. "
            "Allowed: nodeprep_nvidia_driver_source=nvidia keeps NVIDIA's driver; to move to Ubuntu's signed "
            "driver, remove NVIDIA's driver packages first.").format(_names(found['nvidia_packages']),
                                                                     ubuntu_names)))
    return out


def plan(settings, found, boot):
    """What the ubuntu source installs for the kernel that boots next: {driver_package, modules_package,
    modules_installed (the module package for ``boot`` is installed), packages (apt specs: the driver at the exact
    version when one is asked for, ``name=<version>-*`` because Ubuntu's release is 0ubuntu0.<release>.<n>), version
    (Ubuntu's installed driver version)}."""
    branch = str(settings.get('branch', ''))
    open_part = '-open' if settings.get('module_type', 'open') == 'open' else ''
    exact = settings.get('version') or ''
    driver = DRIVER_PACKAGE.format(branch=branch, open=open_part)
    modules = MODULES_PACKAGE.format(branch=branch, open=open_part, kernel=boot)
    return {
        'driver_package': driver,
        'modules_package': modules,
        'modules_installed': found.get('modules', {}).get(boot) == modules,
        'packages': [package_spec(driver, exact), modules],
        'version': found.get('version') if found.get('branch') == branch else '',
    }


def package_spec(name, version):
    """An Ubuntu archive package at the driver's version: ``name=<version>-*`` (release 0ubuntu0.<release>.<n>)."""
    return '{0}={1}-*'.format(name, version) if version else name


def fabricmanager_package(branch):
    """Ubuntu's fabric manager (provides the virtual nvidia-fabricmanager)."""
    return FABRICMANAGER_PACKAGE.format(branch=branch)


def nscq_package(branch):
    return NSCQ_PACKAGE.format(branch=branch)
