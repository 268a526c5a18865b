# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The shm role's sizes: the size setting's grammar (``64G``, ``65536M``, ``64GiB``...), the size /dev/shm gets
(explicit, or from the GPU memory), its tmpfs option, its words in the report, and what check mode can predict
before the driver of this run reports the GPU memory.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import math
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._mounts import ShmError, _SUFFIX, round_pages


def predict_before_gpu_memory(shm, min_bytes, mount_options, fstab=True, remount=True, shrink=False):
    """What check mode can truthfully predict for /dev/shm when the size derives from GPU memory no driver can read
    yet (check mode on a fresh node: the driver is installed in the same run).

    ``shm`` is ``ansible_facts.shm`` (``size_bytes``, ``unlimited``, ``fstab`` with ``size_bytes`` and ``options``).
    ``min_bytes`` is ``nodeprep_shm_min_size`` in bytes, rounded up to a page: the smallest size the ratio can give
    (the GPU memory is unknown, so the derived target T is only known to be at least ``min_bytes``).  The role writes
    ``max(T, live)`` to fstab (``T`` with ``shrink``) and grows the live mount when ``live < T``.

    Returns ``{'fstab': bool, 'live': bool, 'exact': bool, 'fstab_reasons': [...], 'live_reasons': [...]}``:
    ``fstab``/``live`` are True only when the real run changes them whatever the GPU memory is; ``exact`` is False
    when the answer depends on the GPU memory (then the prediction may say unchanged where the real run changes).
    """
    live = shm.get('size_bytes') or 0
    unlimited = bool(shm.get('unlimited'))
    line = shm.get('fstab')
    out = {'fstab': False, 'live': False, 'exact': True, 'fstab_reasons': [], 'live_reasons': []}
    if fstab and not (unlimited and not shrink):
        if line is None:
            out['fstab'] = True
            out['fstab_reasons'].append('no /dev/shm line in fstab')
        elif [o for o in mount_options if o not in (line.get('options') or [])]:
            out['fstab'] = True
            out['fstab_reasons'].append('the fstab line lacks ' + ','.join(
                o for o in mount_options if o not in (line.get('options') or [])))
        else:
            # The size written is at least max(min_bytes, live) without shrink, at least min_bytes with it.
            floor = min_bytes if shrink else max(min_bytes, live)
            written = line.get('size_bytes') or 0
            if written < floor:
                out['fstab'] = True
                out['fstab_reasons'].append('the fstab size {0} is below {1} bytes, the least the role writes'.format(
                    written, floor))
            else:
                out['exact'] = False
    if remount and not unlimited:
        if live < min_bytes:
            out['live'] = True
            out['live_reasons'].append('the live size {0} is below nodeprep_shm_min_size ({1} bytes)'.format(
                live, min_bytes))
        else:
            out['exact'] = False
    elif remount and shrink:
        # Unlimited and shrink: any finite target is smaller.
        out['live'] = True
        out['live_reasons'].append('the live /dev/shm is unlimited and nodeprep_shm_shrink is true')
    return out


GIB = 1024 ** 3
MIB = 1024 ** 2
# A number, then an optional unit: K, M, G, T or P (base 1024) with an optional iB or B, or B alone (bytes).
_SETTING_SIZE = re.compile(r'^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:([kmgtp])(?:i?b)?|b)?\s*$', re.IGNORECASE)
SIZE_FORMS = 'bytes, or a number with K, M, G, T or P (base 1024; KiB/KB forms too)'
# The largest size a setting may give: what a signed 64-bit integer holds (tmpfs reads size= into one).
MAX_BYTES = 2 ** 63 - 1


class SizeTooLarge(ShmError):
    """A size setting written well but larger than MAX_BYTES (a number of 400 digits, .inf)."""


def parse_size(value, name):
    """Bytes of a size setting of the shm role (an int, or ``64G``, ``65536M``, ``64GiB``, ``1P``: base 1024); None
    for None/empty.  ShmError names the setting and the forms allowed.  The shm role's plan (and so the readiness
    check) reads nodeprep_shm_size and nodeprep_shm_min_size with it."""
    if value is None or value == '':
        return None
    if isinstance(value, bool):
        raise ShmError('{0}: {1!r} is not a size; use {2}'.format(name, value, SIZE_FORMS))
    if isinstance(value, (int, float)):
        size = value
    else:
        match = _SETTING_SIZE.match(str(value))
        if not match:
            raise ShmError('{0}: {1!r} is not a size; use {2}'.format(name, value, SIZE_FORMS))
        number, unit = match.groups()
        # More digits than a float holds reads as infinite: too large, like any size above MAX_BYTES.
        size = float(number) * _SUFFIX[(unit or '').lower()]
    if math.isnan(size) or abs(size) > MAX_BYTES:
        raise SizeTooLarge('{0}: {1!r} is larger than {2} bytes'.format(name, value, MAX_BYTES))
    return int(size)


def format_size(num_bytes):
    """Human form of a byte count with binary units (``64.0 GiB``); ``unknown`` for None."""
    if num_bytes is None:
        return 'unknown'
    value = float(num_bytes)
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if abs(value) < 1024 or unit == 'TiB':
            if unit == 'B':
                return '{0} B'.format(int(value))
            return '{0:.1f} {1}'.format(value, unit)
        value /= 1024.0
    return '{0} B'.format(int(num_bytes))  # pragma: no cover


def gpu_memory_bytes(memory_mib):
    """Total GPU memory in bytes from each GPU's memory_total_mib (None counts as 0)."""
    return sum(int(mib or 0) for mib in memory_mib) * MIB


def wanted_size(explicit, floor, ratio, gpu_bytes, page_size=4096):
    """The size the shm role gives /dev/shm: ``explicit`` bytes (nodeprep_shm_size) rounded up to a page when given;
    otherwise ``ratio`` of ``gpu_bytes`` rounded up to a GiB, never less than ``floor`` (nodeprep_shm_min_size)
    rounded up to a page.  The readiness check computes the same size with it."""
    if explicit is not None:
        return round_pages(explicit, page_size)
    return max((int(math.ceil(gpu_bytes * float(ratio))) + GIB - 1) // GIB * GIB, round_pages(floor or 0, page_size))


def size_option(size):
    """The tmpfs size= option for ``size`` bytes: whole GiB as g, else whole MiB as m, else KiB as k."""
    if size % GIB == 0:
        return '{0}g'.format(size // GIB)
    if size % MIB == 0:
        return '{0}m'.format(size // MIB)
    return '{0}k'.format(size // 1024)
