# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The reads of ``kernel_state.rdma`` that the node returns as read (collect/_rdma_state.py): /etc/default/grub,
the Boot Loader Specification entries' ``options`` and ``modinfo -F depends nvidia_peermem``.  rdma_from_read()
parses them in place: on the controller for gpu_node_facts, on the node for kernel_facts.  The rest of the RDMA
path's formats is parsers/_rdma_path.py.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._kernel import KernelError

# The most of each text the node returns (collect/_rdma_state.TEXT_MAX_CHARS: the same bound; a BLS entry and
# /etc/default/grub hold a few hundred bytes, modinfo prints one line).
TEXT_MAX_CHARS = 64 * 1024


def parse_modinfo_depends(rc, out, err=''):
    """``modinfo -F depends nvidia_peermem``: ``(found, depends)``: ``found`` False when modinfo says the module is
    not there (rc 1, "not found"), None when the answer cannot be read; ``depends`` the module names (a list, empty
    for a module that depends on none), None unless found."""
    if rc == 0:
        line = (out or '').strip().splitlines()
        names = line[0].strip() if line else ''
        return True, [name.strip() for name in names.split(',') if name.strip()]
    if rc == 1 and re.search(r'Module \S+ not found', (err or '') + (out or '')):
        return False, None
    return None, None


def parse_default_grub(text):
    """``{name: value}`` of the ``GRUB_*`` assignments of /etc/default/grub (quotes removed; the last one wins)."""
    values = {}
    for line in (text or '').splitlines():
        match = re.match(r'^\s*(GRUB_[A-Z_]+)=(.*)$', line)
        if match:
            value = match.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
                value = value[1:-1]
            values[match.group(1)] = value
    return values


def parse_bls_options(text):
    """The ``options`` line of a Boot Loader Specification entry ('' without one)."""
    for line in (text or '').splitlines():
        words = line.split(None, 1)
        if words and words[0] == 'options':
            return words[1].strip() if len(words) == 2 else ''
    return ''


def _text(value, what, host):
    """A text the node returned (None: it could not be read); KernelError naming the host and the file for anything
    else or more than TEXT_MAX_CHARS (the node returns ``{'over_limit': N}`` for such a file)."""
    if isinstance(value, dict) and value.get('over_limit') is not None:
        raise KernelError('{0}{1} is larger than {2} characters (the most the gather returns)'.format(
            'host {0}: '.format(host) if host else '', what, value['over_limit']))
    if value is not None and not isinstance(value, str):
        raise KernelError('{0}{1}: the node returned {2} instead of its text'.format(
            'host {0}: '.format(host) if host else '', what, type(value).__name__))
    if value is not None and len(value) > TEXT_MAX_CHARS:
        raise KernelError('{0}{1}: {2} characters, more than the {3} the gather returns'.format(
            'host {0}: '.format(host) if host else '', what, len(value), TEXT_MAX_CHARS))
    return value


def boot_args(read, host=None):
    """``{bls: {entry file: options}, grub_cmdline_linux, grub_cmdline_linux_default}`` from the texts the node read
    (``{'bls': {entry file: text}, 'grub': text}``; ``grub_cmdline_linux*`` None without /etc/default/grub)."""
    bls = dict((name, parse_bls_options(_text(text, '/boot/loader/entries/' + name, host)))
               for name, text in read['bls'].items())
    grub = _text(read['grub'], '/etc/default/grub', host)
    values = parse_default_grub(grub) if grub is not None else None
    return {'bls': bls, 'grub_cmdline_linux': None if values is None else values.get('GRUB_CMDLINE_LINUX', ''),
            'grub_cmdline_linux_default': None if values is None else values.get('GRUB_CMDLINE_LINUX_DEFAULT', '')}


def peermem_module(read, host=None):
    """``{found, depends}`` from ``modinfo -F depends nvidia_peermem``'s ``{rc, stdout, stderr}``."""
    _text(read if 'over_limit' in read else None, 'modinfo -F depends nvidia_peermem', host)
    found, depends = parse_modinfo_depends(read['rc'], _text(read['stdout'], 'modinfo -F depends', host),
                                           _text(read['stderr'], 'modinfo -F depends', host))
    return {'found': found, 'depends': depends}


def rdma_from_read(kernel_state, host=None):
    """``kernel_state`` with its ``rdma.boot_args`` and ``rdma.peermem_module`` parsed where the node returned them
    as read (``{'read': ...}``); KernelError naming the host for a read that is not what the node returns."""
    rdma = (kernel_state or {}).get('rdma')
    for key, parse in (('boot_args', boot_args), ('peermem_module', peermem_module)):
        if isinstance(rdma, dict) and isinstance(rdma.get(key), dict) and 'read' in rdma[key]:
            try:
                rdma[key] = parse(rdma[key]['read'], host)
            except (KeyError, TypeError, AttributeError) as exc:
                raise KernelError('{0}rdma.{1}: the node\'s read is garbled ({2}: {3})'.format(
                    'host {0}: '.format(host) if host else '', key, type(exc).__name__, exc))
    return kernel_state
