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

shm_facts() turns what the node read (collect/_shm_state.read_shm) into the ``shm`` namespace: on the controller for
gpu_node_facts (the gather ships no parser of these files), on the node for shm_facts.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._facts_output import to_display
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._raw_text import text_of, where


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


# The shared memory mount point that is reported, not a place for temporary files.
SHM_PATH = '/dev/shm'  # nosec B108


# The most of each file the node returns (collect/_shm_state.TEXT_MAX_BYTES: the same bounds); more is refused.
TEXT_MAX_BYTES = {'meminfo': 64 * 1024, 'mountinfo': 4 * 1024 * 1024, 'fstab': 1024 * 1024}
_FILES = {'meminfo': '/proc/meminfo', 'mountinfo': '/proc/self/mountinfo', 'fstab': '/etc/fstab'}


def _text(read, name, host, required=False, strict=True):
    """The text of file ``name`` of the node's read; ShmError naming the host and the file when it could not be read
    (``strict``) or is garbled."""
    text, problem = text_of(read.get(name), _FILES[name], TEXT_MAX_BYTES[name], ShmError, host, required)
    if problem and strict:
        raise ShmError(problem)
    return text


def _fstab_facts(facts, fstab, fstab_path, path, ram_bytes, page_size):
    entries, errors = parse_fstab_lines(fstab, fstab_path)
    facts['errors'].extend(errors)
    entry = find_fstab(entries, path)
    if entry is None:
        return
    size = None
    explicit = False
    unlimited = False
    if entry['vfstype'] == 'tmpfs':
        try:
            size = tmpfs_size_from_options(entry['options'], ram_bytes, page_size)
        except ShmError as exc:
            facts['errors'].append('{0} line {1}: {2}'.format(fstab_path, entry['line'], exc))
        else:
            explicit = size is not None
            unlimited = is_unlimited(size)
            if unlimited:
                size = None
            elif size is None and ram_bytes is not None:
                size = tmpfs_default_size(ram_bytes, page_size)
    facts['fstab'] = {'options': entry['options'], 'size_bytes': size, 'size_explicit': explicit,
                      'unlimited': unlimited, 'vfstype': entry['vfstype'], 'spec': entry['spec'], 'line': entry['line']}


def shm_facts(read, host=None):
    """The ``shm`` namespace from what the node read (collect/_shm_state.read_shm).  See _shm_facts; a ShmError names
    ``host`` when it is given (the controller resolves many hosts' reads)."""
    try:
        return _shm_facts(read, host)
    except ShmError as exc:
        if host and not str(exc).startswith(where(host, '')):
            raise ShmError(where(host, str(exc)))
        raise


def _shm_facts(read, host):
    """The ``shm`` namespace from what the node read.

    An unlimited tmpfs has size_bytes null and unlimited true (live and in fstab). Lines of /etc/fstab that are not
    entries, or not UTF-8, and a size= on the entry that tmpfs would refuse are listed in ``errors`` naming the
    file and line: the size after the next boot is then unknown.  ShmError for a table that cannot be read, naming
    ``host`` (when given) and the file.
    """
    if not isinstance(read, dict) or not isinstance(read.get('path'), str):
        raise ShmError('{0}: the node\'s read of /dev/shm is not a mapping with its path'.format(where(host, 'shm')))
    path = read['path']
    page_size = read.get('page_size') or 4096
    ram_bytes = None
    swap_bytes = None
    # An unreadable /proc/meminfo leaves the size in percent and the default unknown.
    meminfo = _text(read, 'meminfo', host, False, False)
    if meminfo is not None:
        ram_bytes = parse_meminfo(meminfo)
        try:
            swap_bytes = parse_meminfo(meminfo, 'SwapTotal')
        except ShmError:
            swap_bytes = None
    mounts = parse_mountinfo(_text(read, 'mountinfo', host, True))
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
        if read.get('live'):
            st = read.get('statvfs') or {}
            if 'blocks' not in st:
                raise ShmError('{0}: statvfs: {1}'.format(where(host, path), st.get('error', 'not read')))
            if mount['fstype'] == 'tmpfs' and (st['blocks'] == 0 or is_unlimited(size)):
                facts['unlimited'] = True  # tmpfs reports no blocks when it has no limit
            else:
                facts['size_bytes'] = st['blocks'] * st['frsize']
                facts['free_bytes'] = st['bavail'] * st['frsize']
            facts['used_bytes'] = (st['blocks'] - st['bfree']) * st['frsize'] if st['blocks'] else None
        elif mount['fstype'] == 'tmpfs':
            if is_unlimited(size):
                facts['unlimited'] = True
            else:
                facts['size_bytes'] = size if size is not None else facts['default_size_bytes']
    fstab = _text(read, 'fstab', host)
    if fstab is not None:
        _fstab_facts(facts, fstab, read['fstab'].get('path') or _FILES['fstab'], path, ram_bytes, page_size)
    return facts
