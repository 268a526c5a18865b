# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The NVIDIA DKMS builds a kernel needs before the node may boot it (R24).

NVIDIA's DKMS modules do not build on kernels newer than the driver branch supports.  Before the kernel role makes
a node boot another kernel, every NVIDIA DKMS module that works now must be ``installed`` for that kernel in
``dkms status`` (parsed by _kernel.parse_dkms_status: ``nvidia/580.95.05, <kernel>, x86_64: installed`` since dkms
2.8.6, ``nvidia, 580.95.05, <kernel>, x86_64: installed`` before; dell/dkms commit f83b758).  When the build fails,
DKMS leaves its log at ``/var/lib/dkms/<module>/<version>/build/make.log`` (dell/dkms ``dkms.in``, ``do_build``:
``build_log="$build_dir/make.log"``, moved below ``<kernel>/<arch>/log/`` only after a successful build), whose
first line names the kernel (``DKMS (dkms-3.2.2) make.log for nvidia/580.95.05 for kernel <kernel> (x86_64)``).

``dkms status`` can list nothing although the node has an NVIDIA DKMS driver: dkms 3.0.x (Ubuntu 24.04 ships
3.0.11) stops listing at a module whose tree lost its source (``/var/lib/dkms/<module>/<version>/source`` dangling,
the source removed without ``dkms remove``), prints only ``Error! Could not locate dkms.conf file.`` on stderr and
exits 0 (dkms-project/dkms issue #352; ``module_status`` runs in a subshell that ``die 4`` ends, and the listing
before it is all that is printed); from 3.0.13 it lists the module as ``broken`` (PR #357).  unknown_state says when
the state must count as unknown: the node shows an NVIDIA DKMS driver (a tree under /var/lib/dkms, an installed DKMS
driver package, or a loaded NVIDIA module no per-kernel package provides) while ``dkms status`` lists no NVIDIA
module; the kernel plan then does not reboot.
Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._dkms_status import DKMS_MODULES
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._dkms_status import make_log_path

# The DKMS module names of NVIDIA's kernel modules (their one home: _driver_plan.DKMS_MODULES).
NVIDIA_MODULES = DKMS_MODULES
# How many lines of that log the role shows when it stops a node.
LOG_LINES = 20
# Installed packages that build an NVIDIA driver with DKMS: NVIDIA's (nvidia-dkms[-<branch>][-open] on apt, EL
# kmod-nvidia-open-dkms / kmod-nvidia-latest-dkms), Ubuntu's archive (nvidia-dkms-<branch>[-server][-open]) and
# Debian's (nvidia-kernel-dkms, nvidia-open-kernel-dkms, nvidia-tesla-<branch>-kernel-dkms; R8).
DKMS_PACKAGE_RE = re.compile(r'^(nvidia-dkms(-.+)?|kmod-nvidia-.+-dkms|nvidia(-.+)?-kernel-dkms)$')
# Ubuntu's per-kernel NVIDIA module packages (linux-restricted-modules, R25): a loaded module one of them provides
# for the running kernel is not DKMS's.
UBUNTU_MODULES_PREFIX = 'linux-modules-nvidia-'
_LOG_HEAD_RE = re.compile(r'^DKMS \(.*\) make\.log for (?P<mv>\S+) for kernel (?P<kernel>\S+) \((?P<arch>[^)]+)\)')


def log_kernel(text):
    """The kernel a make.log was written for (its first line), or None."""
    for line in (text or '').splitlines()[:3]:
        match = _LOG_HEAD_RE.match(line.strip())
        if match:
            return match.group('kernel')
    return None


def log_tail(text, lines=LOG_LINES):
    """The last ``lines`` non-empty lines of a log."""
    kept = [line.rstrip() for line in (text or '').splitlines() if line.strip()]
    return kept[-lines:]


def installed_for(entries, kernel, modules=NVIDIA_MODULES):
    """['module/version', ...] of ``modules`` that dkms status shows ``installed`` for ``kernel``."""
    out = []
    for entry in entries or []:
        name = '{0}/{1}'.format(entry.get('module'), entry.get('version'))
        if entry.get('module') in modules and entry.get('kernel') == kernel and entry.get('status') == 'installed' \
                and name not in out:
            out.append(name)
    return out


def registered(entries, modules=NVIDIA_MODULES):
    """['module/version', ...] of ``modules`` that DKMS knows (any state)."""
    out = []
    for entry in entries or []:
        name = '{0}/{1}'.format(entry.get('module'), entry.get('version'))
        if entry.get('module') in modules and name not in out:
            out.append(name)
    return out


def needed_for(entries, running, target, modules=NVIDIA_MODULES):
    """The NVIDIA DKMS modules that must be ``installed`` for ``target`` before the node boots it: those installed for
    the running kernel (what works now), else every NVIDIA module DKMS knows; [] when target is the running kernel.
    Returns (needed, missing): 'module/version' lists, missing those not installed for target."""
    if not target or target == running:
        return [], []
    needed = installed_for(entries, running, modules) or registered(entries, modules)
    have = installed_for(entries, target, modules)
    return needed, [name for name in needed if name not in have]


def build_argv(name, kernel):
    """``dkms install <module>/<version> -k <kernel>`` (builds when needed, then installs)."""
    return ['dkms', 'install', name, '-k', kernel]


def failed_builds(missing, logs, kernel):
    """{'module/version': [last lines]} of the missing builds whose make.log (``logs``: {'module/version': text})
    was written for ``kernel``: the build was tried there and failed."""
    out = {}
    for name in missing:
        text = (logs or {}).get(name)
        if text and log_kernel(text) == kernel:
            out[name] = log_tail(text)
    return out


def build_error(host, target, running, missing, failed, restore, role='kernel'):
    """The message that stops a node whose NVIDIA DKMS modules did not build for the kernel it would boot."""
    parts = []
    for name in missing:
        module, version = name.split('/', 1)
        if name in failed:
            parts.append('{0}: DKMS build failed, {1} ends: {2}'.format(
                name, make_log_path(module, version), ' | '.join(failed[name]) or '(empty)'))
        else:
            parts.append('{0}: not installed for {1} in dkms status, and {2} is not a log of a build for it'.format(
                name, target, make_log_path(module, version)))
    host = host or 'this node'
    return ('{5} on {0}: the NVIDIA driver is not built for {1}, the kernel that would boot next, so the node would '
            'come back without its GPUs; it is not rebooted{2}. {3}. To fix: keep {4} (exclude {1}: another '
            'nodeprep_kernel_source, or remove the kernel package), or choose a driver version that builds for '
            '{1}.'.format(host, target,
                          ' and {0} stays the default boot entry'.format(running) if restore else
                          ' (the boot loader still boots {0} next: remove it or make {1} the default)'.format(
                              target, running),
                          '; '.join(parts), running, role))


def dkms_packages(packages):
    """The installed packages (``{name: [records]}`` of the gather) that build an NVIDIA driver with DKMS."""
    return sorted(name for name, records in (packages or {}).items() if records and DKMS_PACKAGE_RE.match(name))


def packaged_module(packages, running):
    """The installed Ubuntu package that provides the NVIDIA module of the running kernel, or ''."""
    suffix = '-' + (running or '')
    return next((name for name in sorted(packages or {}) if (packages or {})[name] and
                 name.startswith(UBUNTU_MODULES_PREFIX) and name.endswith(suffix)), '')


def dkms_said(status):
    """What ``dkms status`` said besides its listing (``status``: the gather's kernel_state.dkms_status), '' when
    nothing is known of it."""
    status = status if isinstance(status, dict) else {}
    if status.get('missing'):
        return 'dkms is not installed'
    parts = []
    if status.get('rc') not in (None, 0):
        parts.append('dkms status exited {0}'.format(status['rc']))
    if status.get('stderr'):
        parts.append('it printed on stderr: ' + ' | '.join(status['stderr'].splitlines()[:3]))
    if status.get('problems'):
        parts.append('lines it could not read: ' + '; '.join(status['problems'][:3]))
    if not parts and status.get('ran'):
        parts.append('dkms status printed no NVIDIA line and exited 0')
    return ', '.join(parts)


def unknown_state(state, packages, modules=NVIDIA_MODULES):
    """Why the NVIDIA DKMS state of the node is unknown, '' when it is not: ``dkms status`` (kernel_state.dkms)
    lists no NVIDIA module while the node shows an NVIDIA DKMS driver: a version tree under /var/lib/dkms
    (kernel_state.dkms_tree), an installed DKMS driver package (``packages``, the gather's driver_node.packages), or
    a loaded NVIDIA module that no Ubuntu per-kernel package provides for the running kernel.  Whether the driver is
    built for another kernel cannot be told then, so no reboot may rely on it."""
    state = state if isinstance(state, dict) else {}
    if registered(state.get('dkms') or [], modules):
        return ''
    evidence = []
    trees = [tree for tree in state.get('dkms_tree') or [] if isinstance(tree, dict) and tree.get('module') in modules]
    if trees:
        evidence.append('/var/lib/dkms holds {0}'.format(', '.join(
            '{0}/{1}{2}'.format(tree['module'], tree.get('version'), '' if tree.get('source') else
                                ' (its source link does not resolve: a stale tree, its source removed without '
                                'dkms remove)') for tree in trees)))
    found = dkms_packages(packages)
    if found:
        evidence.append('DKMS driver packages are installed ({0})'.format(', '.join(found)))
    module = state.get('nvidia_module') if isinstance(state.get('nvidia_module'), dict) else {}
    if module.get('loaded') and not packaged_module(packages, state.get('running')):
        evidence.append('the NVIDIA module {0}is loaded and no package provides it for {1}'.format(
            module['version'] + ' ' if module.get('version') else '', state.get('running') or 'the running kernel'))
    if not evidence:
        return ''
    said = dkms_said(state.get('dkms_status'))
    return ('dkms status lists no NVIDIA module although {0}{1}; the NVIDIA DKMS state is unknown (dkms 3.0.x lists '
            'nothing past a tree whose source is gone and still exits 0: dkms-project/dkms#352)'.format(
                '; '.join(evidence), ' ({0})'.format(said) if said else ''))


def unknown_error(host, target, running, reason, restore, role='kernel'):
    """The message that stops a node whose NVIDIA DKMS state is unknown (unknown_state) before it boots ``target``."""
    return ('{0} on {1}: {2}. Whether the NVIDIA driver is built for {3}, the kernel that would boot next, cannot be '
            'told, so the node is not rebooted{4}. To fix: repair DKMS until `dkms status` lists the NVIDIA module (a '
            'stale tree: `dkms remove <module>/<version> --all`, or remove /var/lib/dkms/<module>/<version>), or, '
            'where the NVIDIA module is not built by DKMS, install it for {3} first.'.format(
                role, host or 'this node', reason, target,
                ' and {0} stays the default boot entry'.format(running) if restore else
                ' (the boot loader still boots {0} next)'.format(target)))
