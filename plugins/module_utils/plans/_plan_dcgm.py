# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The dcgm role's settings and its plan (see _plan.py for the plan's shape): NVIDIA DCGM 4 from NVIDIA's CUDA
repository (the one the nvidia_driver role configures), the package of the DCGM generation that matches the CUDA
major of the driver, ``nvidia-dcgm`` enabled and running, version-locked like the driver (EL: dnf versionlock of the
exact installed NEVRA; Debian family: an apt hold).  Opt-in (``nodeprep_dcgm_install``).  Pure; no Ansible import.

Package names and what they hold, from NVIDIA/DCGM (v4.6.0, ``cmake/packaging.cmake``, ``docker/Dockerfile.ubi9``,
``docker/Dockerfile.ubuntu22.04``, ``config-files/systemd/nvidia-dcgm.service.in``): ``datacenter-gpu-manager-4-core``
(``nv-hostengine``, ``dcgmi``, the unit ``nvidia-dcgm.service``) and one package per CUDA major,
``datacenter-gpu-manager-4-cuda11``, ``-cuda12``, ``-cuda13``, each requiring the core package at exactly its own
``epoch:version-release`` (epoch 1, release 1: Debian ``1:4.5.2-1``, EL ``datacenter-gpu-manager-4-cuda12-4.5.2-1``).

The CUDA major of the driver: nvidia-smi's ``CUDA Version`` (the highest CUDA the loaded driver supports), else the
driver's branch (NVIDIA CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions": CUDA 11.0
needs >= 450.36.06, 12.0 GA >= 525.60.13, 13.0 GA >= 580.65.06), else ``nodeprep_dcgm_cuda_major``, which also
overrides both.

The plan owns the readiness check ``gpu.dcgm_diag``: what the role would change (the package, the lock, the host
engine) is its drift, so the check fails until the role has run; DCGM's own verdict (``dcgmi diag``, read by the
readiness gather when ``nodeprep_readiness_dcgm`` is true, judged by rules/_dcgm.judge) is drift no run fixes.  Where
the role manages DCGM, a diagnostic that could not run (no dcgmi, no host engine) fails the check instead of skipping
it, saying the role manages DCGM (without the role, a stopped host engine fails too: rules/_dcgm.judge).  The
GPU-node rule (rules/_gpu_node.py, applied by _plan.plan_with) keeps DCGM off a node that is not a GPU node.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _dcgm
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._driver_packages import family_of
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._os_release import os_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._package_db import version_text

ROLE = 'dcgm'
CHECK = _dcgm.CHECK
CHECKS = (CHECK,)
PREFIX = 'nodeprep_dcgm_'
CORE = 'datacenter-gpu-manager-4-core'
CUDA_PACKAGE = 'datacenter-gpu-manager-4-cuda{0}'
CUDA_MAJORS = (11, 12, 13)
PACKAGES = (CORE,) + tuple(CUDA_PACKAGE.format(m) for m in CUDA_MAJORS)
SERVICE = 'nvidia-dcgm.service'
# The first driver branch of each CUDA major (NVIDIA CUDA Toolkit release notes, see above), newest first.
BRANCH_CUDA = ((580, 13), (525, 12), (450, 11))
# What DCGM's packages carry (cmake/packaging.cmake: CPACK_*_PACKAGE_EPOCH 1, release "1").
EPOCH = '1'
RELEASE = '1'
VERSIONLOCK_PLUGIN = {'el': 'python3-dnf-plugin-versionlock'}

_VERSION_RE = re.compile(r'^[0-9]+(\.[0-9]+){1,3}$')
_INSTALLED_RE = re.compile(r'^(?:(?P<epoch>[0-9]+):)?(?P<version>[^-]+)-(?P<release>.+)$')

SETTINGS = {
    PREFIX + 'install': {
        'type': 'bool', 'default': False,
        'description': ["Install NVIDIA DCGM 4 from NVIDIA's CUDA repository (set up by the nvidia_driver role): the "
                        'package of the CUDA major of the driver (C(datacenter-gpu-manager-4-cuda12), '
                        'C(datacenter-gpu-manager-4-cuda13), ...), enable and start C(nvidia-dcgm), lock its version.',
                        'V(false) leaves DCGM alone (installed or not).']},
    PREFIX + 'version': {
        'type': 'str', 'default': '',
        'description': "The DCGM version, such as V(4.5.2). V('') installs the newest in NVIDIA's repository and then "
                       'keeps the node at the version installed (a later run does not upgrade it).'},
    PREFIX + 'cuda_major': {
        'type': 'int', 'default': None,
        'description': 'The CUDA major of the DCGM package (11, 12 or 13). V(null) takes it from the driver '
                       "(nvidia-smi's CUDA version, else the driver branch)."},
    PREFIX + 'versionlock': {
        'type': 'bool', 'default': True,
        'description': 'Lock the DCGM packages at the version installed (EL dnf versionlock, apt hold), like the '
                       'driver.'},
    PREFIX + 'service': {
        'type': 'bool', 'default': True,
        'description': 'Enable and start C(nvidia-dcgm.service) (the host engine the readiness check '
                       'C(gpu.dcgm_diag) needs).'},
    _dcgm.REPLACE_SETTING: {
        'type': 'bool', 'default': False,
        'description': ['What to do where DCGM 3.x (C(datacenter-gpu-manager)) is installed: the DCGM 4 core package '
                        'conflicts with it (dnf refuses the transaction, apt would remove DCGM 3 and its unit '
                        'without asking).',
                        'V(false) (the default) fails the node before any change, naming both (DCGM 3 and 4 differ '
                        'for what uses them - libdcgm.so.3 and .4, the C(dcgmi diag) JSON, the dcgm-exporter '
                        'release - so the switch is the admin\'s).',
                        'V(true) stops and disables C(nvidia-dcgm) (and the deprecated C(dcgm.service)) of DCGM 3, '
                        'releases its apt hold or versionlock, removes C(datacenter-gpu-manager) and installs DCGM 4.']},
}
# The collection-wide nodeprep_gpu_node: the role does nothing on a node that is not a GPU node (_gpu_node.py).
SETTINGS.update(_gpu_node.SETTINGS)


def gather(settings):
    request = _plan.new_gather()
    if settings[PREFIX + 'install']:
        # The installed DCGM packages come with the kernel subset (kernel_state.driver_node.packages, read with the
        # node's own package manager, _driver_plan.keep_package).
        request['subsets'] = ['kernel', 'nvidia']
        # The units of DCGM 3.x too (nvidia-dcgm.service and the deprecated dcgm.service): what replacing it stops.
        request['units'] = [SERVICE] + [u for u in _dcgm.DCGM3_UNITS if u != SERVICE]
    return request


def check_settings(plan, settings):
    version = settings[PREFIX + 'version'] or ''
    if version and not _VERSION_RE.match(version):
        _plan.add_problem(plan, PREFIX + 'version', version, "a DCGM version such as 4.5.2, or '' for the newest")
    major = settings[PREFIX + 'cuda_major']
    if major is not None and major not in CUDA_MAJORS:
        _plan.add_problem(plan, PREFIX + 'cuda_major', major, 'one of {0}, or null to take it from the driver'.format(
            ', '.join(str(m) for m in CUDA_MAJORS)))


def cuda_major_of_branch(branch):
    for first, major in BRANCH_CUDA:
        if branch >= first:
            return major
    return None


def cuda_major(facts, settings):
    """(major, why): the CUDA major the DCGM package must match, and where it was read; (None, why not)."""
    given = settings[PREFIX + 'cuda_major']
    if given is not None:
        return given, 'nodeprep_dcgm_cuda_major'
    nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
    cuda = str(nvidia.get('cuda_version') or '')
    if re.match(r'^[0-9]+\.', cuda):
        return int(cuda.split('.', 1)[0]), 'nvidia-smi: CUDA Version {0}'.format(cuda)
    module = (facts.get('kernel_state') or {}).get('nvidia_module') if isinstance(facts.get('kernel_state'),
                                                                                  dict) else None
    version = (module or {}).get('version') or nvidia.get('driver_version')
    if version and re.match(r'^[0-9]+\.', str(version)):
        branch = str(version).split('.', 1)[0]
        major = cuda_major_of_branch(int(branch))
        if major is not None:
            return major, 'driver {0} (branch {1})'.format(version, branch)
    return None, ('no driver answers (nvidia-smi: {0}) and no nvidia module is loaded'.format(
        nvidia.get('error') or 'no CUDA version'))


def split_installed(text):
    """{epoch, version, release} of an installed version as the gather reports it (``1:4.5.2-1``); None."""
    match = _INSTALLED_RE.match(text or '')
    if not match:
        return None
    return {'epoch': match.group('epoch') or '0', 'version': match.group('version'), 'release': match.group('release')}


def package_spec(family, name, version):
    """What to install: the name, or exactly the version (EL name-4.5.2, Debian name=1:4.5.2-1)."""
    if not version:
        return name
    if family == 'el':
        return '{0}-{1}'.format(name, version)
    return '{0}={1}:{2}-{3}'.format(name, EPOCH, version, RELEASE)


def lock_entry(name, installed):
    """The versionlock.list line dnf writes for an installed package (name-epoch:version-release.*)."""
    parts = split_installed(installed)
    return '{0}-{1}:{2}-{3}.*'.format(name, parts['epoch'], parts['version'], parts['release'])


def installed_packages(facts):
    """{name: 'epoch:version-release' | None} of the DCGM packages (4.x and the 3.x package), from the gather's
    driver_node package list."""
    node = ((facts.get('kernel_state') or {}).get('driver_node') or {}) if isinstance(facts.get('kernel_state'),
                                                                                      dict) else {}
    records = node.get('packages') if isinstance(node.get('packages'), dict) else {}
    out = {}
    for name in PACKAGES + (_dcgm.DCGM3_PACKAGE,):
        found = records.get(name)
        out[name] = version_text(found[-1]) if found else None
    return out


def _unit(facts):
    units = facts.get('nodeprep_units') if isinstance(facts.get('nodeprep_units'), dict) else {}
    return units.get(SERVICE) or {}


def plan(facts, settings, context):
    out = _plan.new_plan(ROLE)
    check_settings(out, settings)
    if not out['problems'] and settings[PREFIX + 'install']:
        _plan_install(out, facts, settings, context)
    _judge(out, facts, settings)
    return out


def _error(out, text):
    """The role fails on this node (changing nothing), and gpu.dcgm_diag fails with the same words."""
    out['errors'].append(text)
    _plan.add_drift(out, CHECK, text, fixable=False)


def _judge(out, facts, settings):
    """gpu.dcgm_diag: DCGM's verdict on the GPUs (rules/_dcgm.judge of what the readiness gather ran), after the
    role's own drift; where the role manages DCGM, a diagnostic that could not run fails instead of skipping."""
    nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
    gpus = nvidia.get('gpus') if isinstance(nvidia.get('gpus'), list) else []
    status, expected, observed = _dcgm.judge(facts.get('nodeprep_dcgm'), gpus)
    managed = settings[PREFIX + 'install'] and not out['problems']
    if managed:
        expected = '{0} installed{1} (nodeprep_dcgm_install); {2}'.format(
            CORE, ', nvidia-dcgm enabled and running' if settings[PREFIX + 'service'] else '', expected)
        probe = facts.get('nodeprep_dcgm') if isinstance(facts.get('nodeprep_dcgm'), dict) else {}
        if probe.get('enabled') and (status == 'skip' or observed.startswith(_dcgm.NO_HOST_ENGINE)):
            status, observed = 'fail', 'the dcgm role manages DCGM on this node, yet ' + observed
    _plan.judge_check(out, CHECK, status, expected, observed)


def _plan_install(out, facts, settings, context):
    host = context.get('host') or 'this node'
    family = family_of(os_facts(facts))
    if family not in ('el', 'debian'):
        _error(out, 'DCGM on {0}: the OS family {1} is not one the role installs on (allowed: EL 8/9/10, Debian and '
                    'Ubuntu).'.format(host, os_facts(facts).get('os_family')))
        return
    node = ((facts.get('kernel_state') or {}).get('driver_node') or {}) if isinstance(facts.get('kernel_state'),
                                                                                      dict) else {}
    dcgm3 = installed_packages(facts).get(_dcgm.DCGM3_PACKAGE)
    replace = None
    if dcgm3:
        units = facts.get('nodeprep_units') if isinstance(facts.get('nodeprep_units'), dict) else {}
        running = _dcgm.dcgm3_units(units)
        if not settings[_dcgm.REPLACE_SETTING]:
            major, _why = cuda_major(facts, settings)
            wanted = [CUDA_PACKAGE.format(major if major in CUDA_MAJORS else '<CUDA major>'), CORE]
            _error(out, _dcgm.dcgm3_refusal(host, dcgm3, running, wanted))
            return
        replace = _dcgm.dcgm3_replace(family, running, node)
        _plan.add_drift(out, CHECK, 'replace: DCGM 3.x ({0} {1}) is installed; {2}=true: stopped, removed, DCGM 4 '
                                    'installed'.format(_dcgm.DCGM3_PACKAGE, dcgm3, _dcgm.REPLACE_SETTING))
        out['args']['replace'] = replace
        # Check mode cannot ask dnf for DCGM 4 while DCGM 3 is installed (the conflict), and the unit it sees is
        # DCGM 3's: the installation and the host engine are predicted by the real tasks' names.
        out['args']['predict_install'] = bool(context.get('check_mode'))
    major, why = cuda_major(facts, settings)
    if major is None:
        if context.get('check_mode') and context.get('driver_pending') is not None:
            out['reports'].append('Check mode on {0}: the DCGM package follows the CUDA major of the driver that this '
                                  'run installs; it is chosen once that driver is loaded.'.format(host))
            _plan.add_drift(out, CHECK, 'install: DCGM (the package of the CUDA major of the driver installed in this '
                                        'run)')
            # The tasks a real run changes here, predicted by name (the CUDA major is read once the driver is loaded):
            # the same keys as an installing plan (relock: a lock after the installation; service: nothing of DCGM is
            # installed yet, so its unit is neither enabled nor running).
            out['args']['predict'] = True
            out['args']['family'] = family
            out['args']['relock'] = bool(settings[PREFIX + 'versionlock'])
            if settings[PREFIX + 'service']:
                out['args']['service'] = {'name': SERVICE, 'enabled': True, 'state': 'started'}
            return
        _error(out, 'DCGM on {0}: cannot tell the CUDA major of the driver ({1}); set nodeprep_dcgm_cuda_major '
                    '(allowed: {2}).'.format(host, why, ', '.join(str(m) for m in CUDA_MAJORS)))
        return
    if major not in CUDA_MAJORS:
        _error(out, 'DCGM on {0}: the driver supports CUDA {1} ({2}), DCGM 4 has packages for CUDA {3}; set '
                    'nodeprep_dcgm_cuda_major.'.format(host, major, why, ', '.join(str(m) for m in CUDA_MAJORS)))
        return
    name = CUDA_PACKAGE.format(major)
    packages = installed_packages(facts)
    wanted = settings[PREFIX + 'version'] or ''
    have = packages.get(name)
    have_core = packages.get(CORE)
    have_parts = split_installed(have)
    core_parts = split_installed(have_core)
    out['args']['package'] = name
    out['args']['cuda_major'] = major
    out['args']['cuda_major_from'] = why
    out['args']['family'] = family
    others = [n for n in PACKAGES if n not in (name, CORE) and packages.get(n)]
    if others:
        out['reports'].append('DCGM on {0}: {1} is also installed (left alone; {2} matches {3}).'.format(
            host, ', '.join(others), name, why))

    install = []
    if have is None:
        install.append('{0} is not installed ({1})'.format(name, why))
    elif wanted and (have_parts or {}).get('version') != wanted:
        install.append('{0} is {1}, wanted {2} (nodeprep_dcgm_version)'.format(name, have, wanted))
    elif have_core is None or (core_parts and have_parts and core_parts['version'] != have_parts['version']):
        install.append('{0} is {1}, {2} is {3}'.format(name, have, CORE, have_core or 'not installed'))
    locked = settings[PREFIX + 'versionlock']
    lock = {'add': [], 'remove': [], 'hold': [], 'unhold': [], 'plugin': None}
    if install:
        for text in install:
            _plan.add_drift(out, CHECK, 'install: ' + text)
        out['args']['install'] = {'name': [package_spec(family, name, wanted), package_spec(family, CORE, wanted)],
                                  'state': 'present'}
        if family == 'el':
            # A lock of another version keeps dnf from installing the one wanted: it goes first.
            lock['remove'] = [e for e in node.get('versionlock') or []
                              if e.lstrip('!').startswith(tuple(p + '-' for p in (name, CORE)))]
        else:
            lock['unhold'] = [p for p in (name, CORE) if p in (node.get('apt_holds') or [])]
    elif locked:
        if family == 'el':
            entries = [lock_entry(name, have), lock_entry(CORE, have_core)]
            current = node.get('versionlock') or []
            lock['add'] = [e for e in entries if e not in current]
            lock['remove'] = [e for e in current if e not in entries
                              and e.lstrip('!').startswith(tuple(p + '-' for p in (name, CORE)))
                              and re.match(r'^!?(?:{0}|{1})-[0-9]+:'.format(re.escape(name), re.escape(CORE)), e)]
            if (lock['add'] or lock['remove']) and not node.get('versionlock_plugin'):
                lock['plugin'] = VERSIONLOCK_PLUGIN['el']
            for entry in lock['add']:
                _plan.add_drift(out, CHECK, 'versionlock: {0} is not locked'.format(entry))
            for entry in lock['remove']:
                _plan.add_drift(out, CHECK, 'versionlock: {0} locks another version'.format(entry))
        else:
            lock['hold'] = [p for p in (name, CORE) if p not in (node.get('apt_holds') or [])]
            for package in lock['hold']:
                _plan.add_drift(out, CHECK, 'apt hold: {0} is not held'.format(package))
    out['args']['lock'] = lock
    # After an installation the lock is planned again from the versions installed (tasks/main.yml).
    out['args']['relock'] = bool(install and locked)

    if settings[PREFIX + 'service']:
        unit = _unit(facts)
        if replace is not None:
            # The unit the gather saw is DCGM 3's, which the replacement stops and removes.
            _plan.add_drift(out, CHECK, '{0}: DCGM 4\'s host engine, enabled and started after the replacement'.format(
                SERVICE))
            out['args']['service'] = {'name': SERVICE, 'enabled': True, 'state': 'started'}
        elif unit.get('enabled') != 'enabled' or unit.get('active') != 'active':
            _plan.add_drift(out, CHECK, '{0}: {1}, {2} (wanted enabled and running)'.format(
                SERVICE, unit.get('active') or 'not installed', unit.get('enabled') or 'not enabled'))
            out['args']['service'] = {'name': SERVICE, 'enabled': True, 'state': 'started'}
