# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""DKMS as the node shows it: the DKMS names of NVIDIA's kernel modules, ``dkms status`` in its old and new
formats, and where DKMS leaves the log of a failed build.

The rules that read them (which builds a kernel needs before it may boot) are rules/_dkms.py.  Pure functions; no
Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._kernel import KernelError

# DKMS module names of the driver: EL packages register nvidia-open, the runfile and NVIDIA's apt packages nvidia,
# Debian-family packages nvidia-current / nvidia-current-open (R8: NVIDIA/nvidia-container-toolkit issue #361).
DKMS_MODULES = ('nvidia', 'nvidia-open', 'nvidia-current', 'nvidia-current-open')
# Where DKMS leaves the log of a build that failed (dell/dkms dkms.in, do_build).
MAKE_LOG = '/var/lib/dkms/{module}/{version}/build/make.log'


def make_log_path(module, version):
    """The make.log of a failed build of module/version."""
    return MAKE_LOG.format(module=module, version=version)


# ---------------------------------------------------------------- DKMS

_DKMS_RE = re.compile(r'^(?P<head>[^:]+?)\s*:\s*(?P<status>.+?)\s*$')


def _parse_line(lineno, line):
    """One line of ``dkms status`` as an entry, None for a line that is no entry (blank, an error or warning dkms
    printed on stdout, a continuation); KernelError naming the line when it cannot be read."""
    if not line.strip():
        return None
    if line.startswith(('Error!', 'Warning:', 'WARNING:')) or line.startswith(' '):
        return None
    match = _DKMS_RE.match(line)
    if not match:
        raise KernelError("dkms status line {0}: cannot parse '{1}'".format(lineno, line))
    parts = [p.strip() for p in match.group('head').split(',')]
    if '/' in parts[0]:
        module, version = parts[0].split('/', 1)
        rest = parts[1:]
    else:
        if len(parts) < 2:
            raise KernelError("dkms status line {0}: no module version in '{1}'".format(lineno, line))
        module, version = parts[0], parts[1]
        rest = parts[2:]
    if len(rest) not in (0, 2):
        raise KernelError("dkms status line {0}: expected 'kernel, arch' after the version in '{1}'".format(
            lineno, line))
    status = match.group('status')
    return {'module': module, 'version': version,
            'kernel': rest[0] if rest else None, 'arch': rest[1] if rest else None,
            'status': status.split(' ', 1)[0].rstrip(','), 'detail': status}


def parse_dkms_status(text):
    """Parse ``dkms status`` in its old (``name, ver, kernel, arch: state``) and new (``name/ver, ...``) forms.
    KernelError names the first line it cannot read."""
    result = []
    for lineno, line in enumerate(text.splitlines(), 1):
        entry = _parse_line(lineno, line)
        if entry is not None:
            result.append(entry)
    return result


def read_dkms_status(text):
    """``(entries, problems)``: what parse_dkms_status reads, with each line it cannot read reported in
    ``problems`` (its message) instead of failing the whole reading.  The gather uses this: an unparsable line makes
    the DKMS state unknown (rules/_dkms.unknown_state), never the kernel facts unreadable."""
    entries = []
    problems = []
    for lineno, line in enumerate((text or '').splitlines(), 1):
        try:
            entry = _parse_line(lineno, line)
        except KernelError as exc:
            problems.append(str(exc))
            continue
        if entry is not None:
            entries.append(entry)
    return entries, problems
