# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The kernel command line and what it says about the IOMMU (Linux
Documentation/admin-guide/kernel-parameters.txt: ``iommu=pt``, ``iommu.passthrough=``, ``intel_iommu=off``,
``amd_iommu=off``), the ``GRUB_CMDLINE_LINUX=`` line of /etc/default/grub with a word added, and the (major, minor) of
a kernel release.  Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re


def parse_cmdline(text):
    """The words of ``/proc/cmdline`` up to ``--`` (what follows goes to init, not to the kernel)."""
    words = []
    for word in (text or '').split():
        if word == '--':
            break
        words.append(word)
    return words


def _param(words, name):
    """Values of ``name=`` on the command line, each split at commas (the last occurrence wins in the kernel; all
    are returned in order)."""
    values = []
    for word in words:
        if word.startswith(name + '='):
            values.extend(v for v in word.split('=', 1)[1].split(',') if v)
    return values


def iommu_cmdline(words):
    """What the command line says about the IOMMU (Documentation/admin-guide/kernel-parameters.txt).

    Returns ``{passthrough, off, words}``: ``passthrough`` true for ``iommu=pt`` or ``iommu.passthrough=1`` (false
    for ``iommu=nopt`` or ``iommu.passthrough=0``, None when not said), ``off`` true for ``iommu=off``,
    ``intel_iommu=off`` or ``amd_iommu=off``, ``words`` the IOMMU words found.
    """
    passthrough = None
    for value in _param(words, 'iommu'):
        if value == 'pt':
            passthrough = True
        elif value == 'nopt':
            passthrough = False
    for value in _param(words, 'iommu.passthrough'):
        if value in ('1', 'y', 'Y', 'on'):
            passthrough = True
        elif value in ('0', 'n', 'N', 'off'):
            passthrough = False
    off = any(v == 'off' for name in ('iommu', 'intel_iommu', 'amd_iommu') for v in _param(words, name))
    found = [w for w in words if w.split('=', 1)[0] in ('iommu', 'iommu.passthrough', 'intel_iommu', 'amd_iommu')]
    return {'passthrough': passthrough, 'off': off, 'words': found}


def kernel_version(release):
    """``(major, minor)`` of a kernel release (``5.14.0-503.el9.x86_64`` -> (5, 14)); None when unreadable."""
    match = re.match(r'^(\d+)\.(\d+)', str(release or ''))
    return (int(match.group(1)), int(match.group(2))) if match else None


def passthrough_in(args):
    """Whether a kernel command line (or the options of a boot entry) asks for IOMMU passthrough or turns it off."""
    said = iommu_cmdline(parse_cmdline(args))
    return bool(said['passthrough'] or said['off'])


def grub_cmdline_line(current, word='iommu=pt'):
    """The ``GRUB_CMDLINE_LINUX=`` line of /etc/default/grub with ``word`` added (``current``: its value)."""
    words = [w for w in (current or '').split() if w.split('=', 1)[0] != word.split('=', 1)[0]]
    return 'GRUB_CMDLINE_LINUX="{0}"'.format(' '.join(words + [word]))
