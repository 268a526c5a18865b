# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Parsers for /proc/self/mountinfo, /etc/fstab, /proc/meminfo and tmpfs size options.

Pure functions; no Ansible import.  Sizes follow tmpfs(5) and the kernel's shmem option
parser: ``size=`` takes memparse() syntax (a C integer - decimal, 0x hex or 0 octal - with
an optional k, m, g, t, p or e suffix, base 1024) or ``N%`` of RAM, and is rounded up to
whole pages; ``nr_blocks=`` counts pages; without either, tmpfs takes half of RAM.
``size=0`` and ``nr_blocks=0`` mean no limit at all (tmpfs(5)): such a mount is reported as
unlimited, never as 0 bytes.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import math
import os
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._facts_module import to_display


class ShmError(Exception):
    """A mount table, fstab or size value that cannot be understood."""


_SUFFIX = {'': 1, 'k': 1024, 'm': 1024 ** 2, 'g': 1024 ** 3, 't': 1024 ** 4, 'p': 1024 ** 5, 'e': 1024 ** 6}
_MEMPARSE_RE = re.compile(r'^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([kKmMgGtTpPeE]?)(%?)$')
_OCTAL_RE = re.compile(r'\\([0-7]{3})')


def unescape(field):
    """Undo the octal escapes (\\040 space, \\011 tab, \\012 newline, \\134 backslash) of mount tables."""
    return _OCTAL_RE.sub(lambda m: chr(int(m.group(1), 8)), field)


def round_pages(size, page_size):
    return (size + page_size - 1) // page_size * page_size


def parse_tmpfs_size(value, ram_bytes=None, page_size=4096, where='size'):
    """Bytes that tmpfs reserves for ``size=value``.

    ``ram_bytes`` (MemTotal) is needed for percentages.  Raises ShmError naming the option.
    """
    text = value.strip()
    match = _MEMPARSE_RE.match(text)
    if not match:
        raise ShmError(
            "{0}={1}: not a tmpfs size (allowed: bytes, or a number with k, m, g, t, p or e, or a percentage "
            "of RAM such as 50%)".format(where, value))
    digits = match.group(1)
    if digits[:2].lower() == '0x':
        number = int(digits, 16)
    elif digits.startswith('0'):
        number = int(digits, 8)
    else:
        number = int(digits)
    number *= _SUFFIX[match.group(2).lower()]
    if match.group(3):
        if ram_bytes is None:
            raise ShmError('{0}={1}: a percentage needs the size of RAM (MemTotal in /proc/meminfo)'.format(
                where, value))
        # shmem: size <<= PAGE_SHIFT; size *= totalram_pages; size /= 100
        pages = ram_bytes // page_size
        number = number * page_size * pages // 100
    return round_pages(number, page_size)


def tmpfs_size_from_options(options, ram_bytes=None, page_size=4096):
    """Size in bytes given by a tmpfs option list, or None when it sets no size (then RAM/2 applies).

    0 means unlimited (size=0, size=0k, nr_blocks=0): see is_unlimited().
    """
    size = None
    for option in options:
        key, _sep, value = option.partition('=')
        if key == 'size':
            size = parse_tmpfs_size(value, ram_bytes, page_size, 'size')
        elif key == 'nr_blocks':
            if not value.isdigit():
                raise ShmError('nr_blocks={0}: not a number of pages'.format(value))
            size = int(value) * page_size
    return size


UNLIMITED_SIZE = 0


def is_unlimited(size):
    """tmpfs reads a size of 0 (size=0, nr_blocks=0, or statvfs reporting 0 blocks) as no limit."""
    return size == UNLIMITED_SIZE


def tmpfs_default_size(ram_bytes, page_size=4096):
    """tmpfs without size=: half of the RAM pages."""
    return (ram_bytes // page_size // 2) * page_size


def parse_meminfo(text, field='MemTotal'):
    """Return ``field`` (MemTotal by default; SwapTotal...) of /proc/meminfo in bytes."""
    for line in text.splitlines():
        if line.startswith(field + ':'):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                factor = 1024 if len(parts) < 3 or parts[2].lower() == 'kb' else 1
                return int(parts[1]) * factor
            raise ShmError("/proc/meminfo: cannot read {0} from '{1}'".format(field, line.strip()))
    raise ShmError('/proc/meminfo: no {0} line'.format(field))


def parse_mountinfo(text):
    """List of dicts: mount_id, parent_id, dev, root, mount_point, mount_options, optional, fstype, source,
    super_options; in the kernel's order."""
    mounts = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split(' ')
        try:
            sep = fields.index('-', 6)
        except ValueError:
            raise ShmError("mountinfo line {0}: no ' - ' separator in '{1}'".format(lineno, line))
        if len(fields) < sep + 4 or sep < 6:
            raise ShmError("mountinfo line {0}: too few fields in '{1}'".format(lineno, line))
        mounts.append({
            'mount_id': fields[0],
            'parent_id': fields[1],
            'dev': fields[2],
            'root': unescape(fields[3]),
            'mount_point': unescape(fields[4]),
            'mount_options': fields[5].split(','),
            'optional': fields[6:sep],
            'fstype': fields[sep + 1],
            'source': unescape(fields[sep + 2]),
            'super_options': fields[sep + 3].split(','),
        })
    return mounts


def parse_fstab(text, path='/etc/fstab'):
    """List of dicts: spec, file, vfstype, options (list), freq, passno, line.

    Raises ShmError for the first line that is not an fstab entry; parse_fstab_lines() reports them all.
    """
    entries, errors = parse_fstab_lines(text, path)
    if errors:
        raise ShmError(errors[0])
    return entries


def parse_fstab_lines(text, path='/etc/fstab'):
    """(entries, errors): every fstab entry, and an error naming path and line for each line that is not one.

    mount(8) skips such a line with a parse error; it is reported here, never skipped silently. Bytes that are not
    UTF-8 (text decoded with surrogateescape) are shown with \\x escapes and reported as an error of their line.
    """
    entries = []
    errors = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        shown = to_display(raw)
        if shown != raw:
            errors.append('{0} line {1}: not UTF-8 (shown with \\x escapes)'.format(path, lineno))
        line = shown.strip()
        if not line or line.startswith('#'):
            continue
        fields = line.split()
        if len(fields) < 3:
            errors.append("{0} line {1}: expected at least 'spec file vfstype', got '{2}'".format(path, lineno, line))
            continue
        entries.append({
            'spec': unescape(fields[0]),
            'file': unescape(fields[1]),
            'vfstype': fields[2],
            'options': fields[3].split(',') if len(fields) > 3 else ['defaults'],
            'freq': fields[4] if len(fields) > 4 else '0',
            'passno': fields[5] if len(fields) > 5 else '0',
            'line': lineno,
        })
    return entries, errors


def _norm(path):
    path = os.path.normpath(path)
    return path if path != '//' else '/'


def find_mount(mounts, path):
    """The visible (last) mount whose mount point is path, or None."""
    found = None
    for mount in mounts:
        if _norm(mount['mount_point']) == _norm(path):
            found = mount
    return found


def find_fstab(entries, path):
    """The last fstab entry for path (mount -a mounts them in order; the last one ends on top)."""
    found = None
    for entry in entries:
        if _norm(entry['file']) == _norm(path):
            found = entry
    return found


def merge_options(mount):
    """Per-mount options, then the superblock options not already listed."""
    merged = list(mount['mount_options'])
    for option in mount['super_options']:
        if option not in merged:
            merged.append(option)
    return merged


def _read(path):
    with open(path, 'rb') as handle:
        return handle.read().decode('utf-8', 'surrogateescape')


# The shared memory mount point that is reported, not a place for temporary files.
SHM_PATH = '/dev/shm'  # nosec B108


def collect_shm_facts(module, path=SHM_PATH, root='/'):
    """Return the ``shm`` namespace. module is unused (kept for the collector contract).

    An unlimited tmpfs has size_bytes null and unlimited true (live and in fstab). Lines of /etc/fstab that are not
    entries, or not UTF-8, and a size= on the entry that tmpfs would refuse are listed in ``errors`` naming the
    file and line: the size after the next boot is then unknown.
    """
    root = root or '/'
    live = root == '/'
    page_size = os.sysconf('SC_PAGE_SIZE') if live else 4096
    ram_bytes = None
    swap_bytes = None
    try:
        meminfo = _read(os.path.join(root, 'proc/meminfo'))
    except (IOError, OSError):
        meminfo = None
    if meminfo is not None:
        ram_bytes = parse_meminfo(meminfo)
        try:
            swap_bytes = parse_meminfo(meminfo, 'SwapTotal')
        except ShmError:
            swap_bytes = None
    mountinfo_path = os.path.join(root, 'proc/self/mountinfo')
    try:
        mounts = parse_mountinfo(_read(mountinfo_path))
    except (IOError, OSError) as exc:
        raise ShmError('cannot read {0}: {1}'.format(mountinfo_path, exc))
    mount = find_mount(mounts, path)
    facts = {'path': path, 'mounted': mount is not None, 'fstype': None, 'source': None, 'size_bytes': None,
             'unlimited': False, 'used_bytes': None, 'free_bytes': None, 'mount_options': [], 'fstab': None,
             'ram_bytes': ram_bytes, 'swap_bytes': swap_bytes, 'default_size_bytes': None, 'errors': []}
    if ram_bytes is not None:
        facts['default_size_bytes'] = tmpfs_default_size(ram_bytes, page_size)
    if mount is not None:
        facts['fstype'] = mount['fstype']
        facts['source'] = to_display(mount['source'])
        facts['mount_options'] = [to_display(o) for o in merge_options(mount)]
        size = None
        if mount['fstype'] == 'tmpfs':
            size = tmpfs_size_from_options(mount['super_options'], ram_bytes, page_size)
        if live:
            st = os.statvfs(path)
            if mount['fstype'] == 'tmpfs' and (st.f_blocks == 0 or is_unlimited(size)):
                facts['unlimited'] = True  # tmpfs reports no blocks when it has no limit
            else:
                facts['size_bytes'] = st.f_blocks * st.f_frsize
                facts['free_bytes'] = st.f_bavail * st.f_frsize
            facts['used_bytes'] = (st.f_blocks - st.f_bfree) * st.f_frsize if st.f_blocks else None
        elif mount['fstype'] == 'tmpfs':
            if is_unlimited(size):
                facts['unlimited'] = True
            else:
                facts['size_bytes'] = size if size is not None else facts['default_size_bytes']
    fstab_path = os.path.join(root, 'etc/fstab')
    if os.path.exists(fstab_path):
        entries, errors = parse_fstab_lines(_read(fstab_path), to_display(fstab_path))
        facts['errors'].extend(errors)
        entry = find_fstab(entries, path)
        if entry is not None:
            size = None
            explicit = False
            unlimited = False
            if entry['vfstype'] == 'tmpfs':
                try:
                    size = tmpfs_size_from_options(entry['options'], ram_bytes, page_size)
                except ShmError as exc:
                    facts['errors'].append('{0} line {1}: {2}'.format(to_display(fstab_path), entry['line'], exc))
                else:
                    explicit = size is not None
                    unlimited = is_unlimited(size)
                    if unlimited:
                        size = None
                    elif size is None and ram_bytes is not None:
                        size = tmpfs_default_size(ram_bytes, page_size)
            facts['fstab'] = {'options': entry['options'], 'size_bytes': size, 'size_explicit': explicit,
                              'unlimited': unlimited, 'vfstype': entry['vfstype'], 'spec': entry['spec'],
                              'line': entry['line']}
    return facts


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


def parse_size(value, name):
    """Bytes of a size setting of the shm role (an int, or ``64G``, ``65536M``, ``64GiB``, ``1P``: base 1024); None
    for None/empty.  ShmError names the setting and the forms allowed.  The shm role's plan (and so the readiness
    check) reads nodeprep_shm_size and nodeprep_shm_min_size with it."""
    if value is None or value == '':
        return None
    if isinstance(value, bool):
        raise ShmError('{0}: {1!r} is not a size; use {2}'.format(name, value, SIZE_FORMS))
    if isinstance(value, (int, float)):
        return int(value)
    match = _SETTING_SIZE.match(str(value))
    if not match:
        raise ShmError('{0}: {1!r} is not a size; use {2}'.format(name, value, SIZE_FORMS))
    number, unit = match.groups()
    return int(float(number) * _SUFFIX[(unit or '').lower()])


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
