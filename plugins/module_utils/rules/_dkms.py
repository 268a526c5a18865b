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
