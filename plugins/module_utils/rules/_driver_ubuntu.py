# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Ubuntu's own NVIDIA driver flavour (REALITY R25): Canonical-signed, prebuilt kernel modules, no DKMS.

Ubuntu's archive ships the data-centre driver as the -server series (source nvidia-graphics-drivers-<branch>-server,
versions ``<driver>-0ubuntu0.<release>.<n>``) and, per kernel ABI, the Canonical-signed modules
``linux-modules-nvidia-<branch>-server[-open]-<kernel>`` (source linux-restricted-modules, versioned like the
kernel), pulled for every new kernel of a flavour by the meta package
``linux-modules-nvidia-<branch>-server[-open]-<flavour>`` (generic, generic-hwe-24.04, aws, ...; ubuntu-drivers names
it from the installed ``linux-image-<flavour>``: canonical/ubuntu-drivers-common ``UbuntuDrivers/detect.py``,
``get_linux_modules_metapackage``).  The userspace without DKMS is ``nvidia-headless-no-dkms-<branch>-server[-open]``
with ``nvidia-utils-<branch>-server``: ``nvidia-driver-<branch>-server`` pulls Ubuntu's DKMS package
``nvidia-dkms-<branch>-server`` and its source, which NVIDIA's precompiled driver container had to purge again
before it moved to the no-DKMS set (NVIDIA/gpu-driver-container commit 8a29f61,
``ubuntu24.04/precompiled/nvidia-driver`` ``_install_driver``).  Its fabric manager and NSCQ keep the branch in their
names: ``nvidia-fabricmanager-<branch>`` (which provides the virtual ``nvidia-fabricmanager``) and
``libnvidia-nscq-<branch>``.  NVIDIA's repository names (nvidia-open, nvidia-dkms-open, cuda-drivers) are the other
flavour.

Ubuntu's archive has a DKMS flavour too: ``nvidia-driver-<branch>[-open]`` (or ``-server``) with
``nvidia-dkms-<branch>[-server][-open]``, what ubuntu-drivers installs when no module package exists for the
kernel (``detect.py``: "Falling back to nvidia-dkms-<flavour>").  Up to 580 NVIDIA's repository uses the same names
(``nvidia-dkms-580-open``), so the origin is read from the version: Ubuntu's updates of a stable release carry the
release in the Debian revision (``515.86.01-0ubuntu0.22.04.1``: NVIDIA/ansible-role-nvidia-driver issue 72;
``570.211.01-0ubuntu1.24.04.1``: canonical/core-base PR 439), NVIDIA's repository ``<V>-0ubuntu1`` (580) or
``<V>-1ubuntu1`` (590, which also drops the branch from the names).  The collection manages the two other flavours
and refuses this one (refusals), naming it and both it manages.

``flavour(packages)`` tells which flavour the installed packages are (from the package list the driver plan
gathered, _driver_node.read_driver_node); ``refusals(os_facts, settings, found)`` says when a setting would swap one
flavour for another; ``plan(settings, found, boot)`` is what ``nodeprep_nvidia_driver_source: ubuntu`` installs;
``kernel_modules`` is what a kernel needs before the node may boot it (the kernel plan), ``flavour_metas`` the meta
packages that keep later kernels covered.  _driver.driver_plan and _plan_kernel call them.  Pure functions; no Ansible
import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._driver_packages import (
    UBUNTU_MODULES_META_RE,
    UBUNTU_MODULES_RE,
    image_meta_flavours,
    modules_prefixes,
)

SOURCES = ('nvidia', 'ubuntu')

# Ubuntu's driver packages (the -server series of the archive).
UBUNTU_DRIVER_RE = re.compile(
    r'^(nvidia-driver|nvidia-headless-no-dkms|nvidia-headless|nvidia-utils|nvidia-compute-utils|'
    r'nvidia-kernel-common|libnvidia-compute)-(?P<branch>\d{3})-server(?P<open>-open)?$')
# The per-kernel module packages (the kernel part starts with a digit: 6.8.0-60-generic) and the meta packages (a
# flavour name: generic, generic-hwe-24.04, ...) are parsers/_driver_packages' UBUNTU_MODULES_RE and
# UBUNTU_MODULES_META_RE.  Only Ubuntu's archive has linux-modules-nvidia-*.
# Ubuntu's DKMS packages: nvidia-dkms-<branch>[-server][-open] (the -server ones and every branch from 590 are Ubuntu's
# only; below 590 the release in the version tells them from NVIDIA's), and the desktop driver meta packages of
# the same flavour.
UBUNTU_DKMS_RE = re.compile(r'^nvidia-dkms-(?P<branch>\d{3})(?P<server>-server)?(?P<open>-open)?$')
UBUNTU_DESKTOP_DRIVER_RE = re.compile(r'^nvidia-driver-(?P<branch>\d{3})(?P<server>)(?P<open>-open)?$')
# The Ubuntu release in a Debian revision of Ubuntu's updates (0ubuntu0.24.04.1, 0ubuntu1.24.04.1).
UBUNTU_RELEASE_RE = re.compile(r'ubuntu\d+\.\d{2}\.\d{2}')
# NVIDIA's repository driver: its meta packages and its DKMS packages (nvidia-dkms-<B>[-open] up to 580,
# nvidia-dkms[-open] from 590; Ubuntu's are nvidia-dkms-<B>-server[-open]).  The pinning packages are apt preferences,
# not a driver: one left by an earlier run does not make the node NVIDIA's.
NVIDIA_REPO_RE = re.compile(r'^(nvidia-open|cuda-drivers|nvidia-dkms(-\d{3})?(-open)?)$')

# What the ubuntu source installs: the archive's userspace without DKMS, nvidia-smi, and the modules for the boot
# kernel (then the flavour's module meta package, flavour_metas).
DRIVER_PACKAGE = 'nvidia-headless-no-dkms-{branch}-server{open}'
UTILS_PACKAGE = 'nvidia-utils-{branch}-server'
MODULES_PREFIX = 'linux-modules-nvidia-{branch}-server{open}-'
MODULES_PACKAGE = MODULES_PREFIX + '{kernel}'
FABRICMANAGER_PACKAGE = 'nvidia-fabricmanager-{branch}'
NSCQ_PACKAGE = 'libnvidia-nscq-{branch}'
VERSION_PACKAGES = ('nvidia-kernel-common-{branch}-server', 'nvidia-headless-no-dkms-{branch}-server-open',
                    'nvidia-headless-no-dkms-{branch}-server', 'nvidia-driver-{branch}-server-open',
                    'nvidia-driver-{branch}-server', 'nvidia-utils-{branch}-server')


def _ubuntu_archive(match, records):
    """Whether a DKMS or desktop driver package (``match`` of UBUNTU_DKMS_RE / UBUNTU_DESKTOP_DRIVER_RE) is
    Ubuntu's archive's: a -server one, a branch from 590 (NVIDIA's repository names have no branch from then), or a
    version with an Ubuntu release in its revision."""
    return bool(match.group('server')) or int(match.group('branch')) >= 590 or \
        any(UBUNTU_RELEASE_RE.search(str(record.get('release') or record.get('version') or ''))
            for record in records or [])


def flavour(packages):
    """Which driver flavour the installed packages are: {flavour: 'ubuntu' | 'ubuntu-dkms' | 'nvidia' | 'both' |
    'none', ubuntu_packages, nvidia_packages, dkms_packages (Ubuntu's DKMS flavour: its DKMS packages and driver
    meta packages; sorted names), branch (of Ubuntu's packages, '' when none), open (Ubuntu's modules are the open
    ones), modules ({kernel: package} of the per-kernel module packages), meta (module meta packages), version
    (Ubuntu's driver version, '' when none) and version_package (the package it was read from)}.  'ubuntu-dkms'
    whenever one of Ubuntu's DKMS packages is installed: the module it builds is the one the node loads (DKMS installs
    below updates/, which modprobe prefers)."""
    packages = packages or {}
    ubuntu = []
    nvidia = []
    dkms = []
    modules = {}
    meta = []
    branches = []
    opened = []
    for name in sorted(packages):
        records = packages[name]
        if not records:
            continue
        dkms_match = UBUNTU_DKMS_RE.match(name) or UBUNTU_DESKTOP_DRIVER_RE.match(name)
        if dkms_match and _ubuntu_archive(dkms_match, records):
            dkms.append(name)
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
    version_package = ''
    for pattern in VERSION_PACKAGES:
        records = packages.get(pattern.format(branch=branch)) or []
        if branch and records:
            version = records[-1]['version']
            version_package = pattern.format(branch=branch)
            break
    if dkms:
        kind = 'ubuntu-dkms'
    else:
        kind = 'both' if ubuntu and nvidia else 'ubuntu' if ubuntu else 'nvidia' if nvidia else 'none'
    return {'flavour': kind, 'ubuntu_packages': ubuntu, 'nvidia_packages': nvidia, 'dkms_packages': dkms,
            'branch': branch, 'open': any(opened) or not opened, 'modules': modules, 'meta': meta,
            'version': version, 'version_package': version_package}


def _names(names, most=4):
    shown = list(names[:most])
    if len(names) > most:
        shown.append('and {0} more'.format(len(names) - most))
    return ', '.join(shown)


def signed_names(settings):
    """What source ubuntu installs, in words: the no-DKMS userspace with the modules of each kernel."""
    branch = str(settings.get('branch', ''))
    open_part = '-open' if settings.get('module_type', 'open') == 'open' else ''
    return '{0} with {1}<kernel>'.format(DRIVER_PACKAGE.format(branch=branch, open=open_part),
                                         MODULES_PREFIX.format(branch=branch, open=open_part))


def refusals(os_facts, settings, found):
    """[(check, message)] when the source setting cannot be used on this node (check 'source') or would swap the
    installed flavour for another one (check 'flavour'); each message names the flavour found and the one the setting
    installs (Ubuntu's DKMS flavour: both flavours the collection manages)."""
    source = settings.get('source') or 'nvidia'
    ubuntu_names = signed_names(settings)
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
            "nodeprep_nvidia_driver_source=ubuntu installs Ubuntu's driver packages ({0}); "
            'nodeprep_nvidia_driver_package_set={1} is not offered with it. Allowed with source ubuntu: '
            'full.').format(ubuntu_names, settings.get('package_set'))))
        return out
    kind = found.get('flavour')
    if kind == 'ubuntu-dkms':
        wanted = ("NVIDIA's repository packages (nvidia-open with nvidia-dkms-open)" if source == 'nvidia' else
                  "Ubuntu's Canonical-signed driver ({0})".format(ubuntu_names))
        out.append(('flavour', (
            "this node runs Ubuntu's DKMS-built NVIDIA driver from Ubuntu's archive (installed: {0}), a flavour the "
            "role does not manage; nodeprep_nvidia_driver_source={1} would install {2} over it and replace the "
            "module the node loads. The role manages NVIDIA's repository driver (nodeprep_nvidia_driver_source="
            "nvidia: nvidia-open with nvidia-dkms-open) and Ubuntu's Canonical-signed driver "
            "(nodeprep_nvidia_driver_source=ubuntu: {3}, no DKMS). To go on: remove Ubuntu's DKMS driver first "
            "(apt-get purge {4}), then run the role with either source.").format(
                _names(found['dkms_packages']), source, wanted, ubuntu_names, ' '.join(found['dkms_packages']))))
    elif source == 'nvidia' and kind in ('ubuntu', 'both'):
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


def plan(settings, found, boot, candidates=None):
    """What the ubuntu source installs for the kernel that boots next: {driver_package, modules_package,
    modules_installed (the module package for ``boot`` is installed), modules_available (False when the gather's apt
    candidates say the archive has none: ``candidates``, kernel_state.driver_node.apt_candidates; None when not
    read), packages (apt specs: the userspace and nvidia-smi at the exact version when one is asked for,
    ``name=<version>-*`` because Ubuntu's release is 0ubuntu0.<release>.<n>; the modules of ``boot``), version
    (Ubuntu's installed driver version) and version_package (the package it was read from)}."""
    branch = str(settings.get('branch', ''))
    open_part = '-open' if settings.get('module_type', 'open') == 'open' else ''
    exact = settings.get('version') or ''
    driver = DRIVER_PACKAGE.format(branch=branch, open=open_part)
    utils = UTILS_PACKAGE.format(branch=branch)
    modules = MODULES_PACKAGE.format(branch=branch, open=open_part, kernel=boot)
    installed = found.get('modules', {}).get(boot) == modules
    return {
        'driver_package': driver,
        'modules_package': modules,
        'modules_installed': installed,
        'modules_available': None if installed or not isinstance(candidates, dict) or modules not in candidates
        else bool(candidates.get(modules)),
        'packages': [package_spec(driver, exact), package_spec(utils, exact), modules],
        'version': found.get('version') if found.get('branch') == branch else '',
        'version_package': found.get('version_package') if found.get('branch') == branch else '',
    }


def kernel_modules(packages, candidates, running, target):
    """Before the node may boot ``target``: Ubuntu's module packages it needs, for each flavour of them the node has
    (the prefixes of the packages installed for the running kernel, else of any installed).  ``needed``,
    ``missing`` (not installed), ``install`` (missing and installable: an apt candidate, or candidates not read:
    ``candidates`` None, the installation then tells), ``unavailable`` (missing, and the gather's apt lists have
    no candidate).  Nothing when target is the running kernel or no Ubuntu module package is installed."""
    packages = packages or {}
    out = {'needed': [], 'missing': [], 'install': [], 'unavailable': []}
    if not target or target == running:
        return out
    running_prefixes = []
    for name in sorted(packages):
        match = UBUNTU_MODULES_RE.match(name)
        if packages[name] and match and match.group('kernel') == running:
            running_prefixes.append(match.group('prefix'))
    prefixes = running_prefixes or modules_prefixes(packages)
    out['needed'] = [prefix + target for prefix in prefixes]
    out['missing'] = [name for name in out['needed'] if not packages.get(name)]
    for name in out['missing']:
        known = isinstance(candidates, dict)
        (out['install'] if not known or candidates.get(name) else out['unavailable']).append(name)
    return out


def modules_error(host, target, running, names, tried=False, role='kernel'):
    """The message that stops a node before it boots a kernel that Ubuntu's signed NVIDIA modules are missing for."""
    return ('{0} on {1}: Ubuntu\'s Canonical-signed NVIDIA modules are not installed for {2}, the kernel that would '
            'boot next ({3}{4}), so the node would come back without its GPUs; it is not rebooted (the boot loader '
            'still boots {2} next). To fix: install {3} once Ubuntu publishes it (linux-restricted-modules follows '
            'each kernel ABI; apt-get update refreshes the lists) and run again, or keep {5}: remove linux-image-{2} '
            '(and hold the kernel meta package until the modules are there).'.format(
                role, host or 'this node', target, ', '.join(names),
                ': the installation did not bring it' if tried else
                ': no installation candidate in the apt lists (apt-cache policy)', running))


def flavour_metas(settings, kernel_packages, candidates, packages):
    """The module meta packages that keep the kernels of each installed kernel flavour covered (``linux-image-generic``
    -> ``linux-modules-nvidia-<branch>-server[-open]-generic``): ``[{name, installed, available}]``, ``available``
    the gather's apt candidate (None when not read: the candidates are read once a module package is installed)."""
    branch = str(settings.get('branch', ''))
    open_part = '-open' if settings.get('module_type', 'open') == 'open' else ''
    prefix = MODULES_PREFIX.format(branch=branch, open=open_part)
    out = []
    for flavour_name in image_meta_flavours(kernel_packages):
        name = prefix + flavour_name
        installed = bool((packages or {}).get(name))
        available = None
        if isinstance(candidates, dict) and name in candidates:
            available = bool(candidates[name])
        out.append({'name': name, 'installed': installed, 'available': available})
    return out


def package_spec(name, version):
    """An Ubuntu archive package at the driver's version: ``name=<version>-*`` (release 0ubuntu0.<release>.<n>)."""
    return '{0}={1}-*'.format(name, version) if version else name


def fabricmanager_package(branch):
    """Ubuntu's fabric manager (provides the virtual nvidia-fabricmanager)."""
    return FABRICMANAGER_PACKAGE.format(branch=branch)


def nscq_package(branch):
    return NSCQ_PACKAGE.format(branch=branch)
