# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""pam_limits and systemd resource limit configuration: the formats, and how pam_limits resolves them.

The parsers and the evaluator are pure functions (no Ansible import).  They follow
Linux-PAM's pam_limits.c (parse_config_file / process_limit / setup_limits):

* ``limits.conf`` first, then ``limits.d/*.conf`` sorted by name in C-locale order;
* every matching line is applied in order; a line only replaces a value that was set by
  a source of the same or lower precedence: user (name or uid range) > @group >
  ``*`` (the ``%`` domains are for maxlogins only); so a later line of the same rank wins,
  across files too;
* type ``-`` sets soft then hard; when the soft half is held by a stronger source the
  hard half is not looked at either (pam_limits returns early);
* ``-1``, ``-``, ``unlimited`` and ``infinity`` mean unlimited (not for nice/priority);
  ``nofile unlimited`` becomes ``/proc/sys/fs/nr_open``; soft is clamped to hard (and then comes from where the
  hard value does);
* a two-field line ``<domain> -`` for the user means "no limits": pam_limits stops and
  sets nothing.

Debian and Ubuntu patch pam_limits (027_pam_limits_better_init_allow_explicit_root):
``*``, ``@group`` and ``%group`` lines are not applied to uid 0, and the starting values
come from ``/proc/1/limits`` (with built-in fallbacks) instead of the calling process.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _slurm_config


class LimitsError(Exception):
    """A limits.conf or systemd limit value that cannot be understood."""


RLIM_INFINITY = 2 ** 64 - 1
UNLIMITED = 'unlimited'
# A user name in the users asked for: any non-root user that no user, @group or uid-range line names, so only the
# ``*`` lines (and the starting values) reach it: what an ordinary user, the user a job runs as, gets from them.
ANY_USER = '*'

# item -> (multiplier to bytes/seconds as pam_limits applies it, /proc/<pid>/limits name)
RLIMIT_ITEMS = {
    'core': (1024, 'Max core file size'),
    'data': (1024, 'Max data size'),
    'fsize': (1024, 'Max file size'),
    'memlock': (1024, 'Max locked memory'),
    'nofile': (1, 'Max open files'),
    'rss': (1024, 'Max resident set'),
    'stack': (1024, 'Max stack size'),
    'cpu': (60, 'Max cpu time'),
    'nproc': (1, 'Max processes'),
    'as': (1024, 'Max address space'),
    'locks': (1, 'Max file locks'),
    'sigpending': (1, 'Max pending signals'),
    'msgqueue': (1, 'Max msgqueue size'),
    'nice': (1, 'Max nice priority'),
    'rtprio': (1, 'Max realtime priority'),
}
OTHER_ITEMS = ('maxlogins', 'maxsyslogins', 'priority', 'nonewprivs', 'chroot')
ALL_ITEMS = tuple(sorted(RLIMIT_ITEMS)) + OTHER_ITEMS
TYPES = ('soft', 'hard', '-')

# precedence ranks of pam_limits.c (lower wins)
SRC_USER, SRC_GROUP, SRC_ALLGROUP, SRC_ALL, SRC_DEFAULT, SRC_KERNEL, SRC_NONE = range(7)

# Debian's fallbacks when /proc/1/limits lacks an item, in limits.conf units
DEBIAN_FALLBACK = {
    'cpu': (UNLIMITED, UNLIMITED), 'fsize': (UNLIMITED, UNLIMITED), 'data': (UNLIMITED, UNLIMITED),
    'rss': (UNLIMITED, UNLIMITED), 'nproc': (UNLIMITED, UNLIMITED), 'as': (UNLIMITED, UNLIMITED),
    'locks': (UNLIMITED, UNLIMITED), 'memlock': (64, 64), 'sigpending': (16382, 16382),
    'msgqueue': (819200, 819200), 'core': (0, UNLIMITED), 'stack': (8192, UNLIMITED),
    'nofile': (1024, 1024),
}
# Debian 12 (libpam 1.5.2-6) hands out at most this soft nofile when it starts from
# /proc/1/limits (observed: PID 1 soft 32768 gave a session soft 1024).
DEBIAN_NOFILE_SOFT_CAP = 1024

SYSTEMD_ITEMS = {'memlock': 'MEMLOCK', 'nofile': 'NOFILE'}

_NUM_RE = re.compile(r'^\s*([+-]?)(\d+)')


def _is_less(a, b):
    """a < b for limit values where 'unlimited' is infinite."""
    if a == UNLIMITED:
        return False
    if b == UNLIMITED:
        return True
    return a < b


ULLONG_MAX = 2 ** 64 - 1
INT_MIN, INT_MAX = -2 ** 31, 2 ** 31 - 1


def parse_value(item, value, where=''):
    """Turn a limits.conf value into 'unlimited' or an int in limits.conf units.

    Mirrors process_limit() of Linux-PAM's pam_limits.c: the special words (not for priority and nice);
    strtol() clamped to an int for priority, nice, maxlogins and maxsyslogins; strtoull() for the rlimits, which
    reads leading digits, saturates at ULLONG_MAX (= RLIM_INFINITY) and wraps a negative number around
    (``-5`` is 2**64 - 5); then the KiB and minute items overflow to unlimited.
    """
    value = value.lower()
    prefix = '{0}: '.format(where) if where else ''
    if item == 'chroot':
        return value
    if item == 'nonewprivs':
        if value in ('0', '1'):
            return int(value)
        raise LimitsError("{0}wrong limit value '{1}' for item 'nonewprivs' (allowed: 0, 1)".format(prefix, value))
    signed = item in ('priority', 'nice', 'maxlogins', 'maxsyslogins')
    if item not in ('priority', 'nice') and value in ('-1', '-', 'unlimited', 'infinity'):
        return UNLIMITED
    match = _NUM_RE.match(value)
    if not match:
        raise LimitsError(
            "{0}wrong limit value '{1}' for item '{2}' (allowed: a number, -1, -, unlimited, infinity)".format(
                prefix, value, item))
    number = int(match.group(2))
    negative = match.group(1) == '-'
    if signed:
        number = max(INT_MIN, min(INT_MAX, -number if negative else number))
        if item == 'nice':
            number = max(-20, min(19, number))
        return number
    if number > ULLONG_MAX:
        number = ULLONG_MAX  # strtoull: ERANGE, whatever the sign
    elif negative:
        number = (ULLONG_MAX + 1 - number) % (ULLONG_MAX + 1)  # strtoull negates in unsigned arithmetic
    if item in RLIMIT_ITEMS:
        factor = RLIMIT_ITEMS[item][0]
        if number >= RLIM_INFINITY // factor:
            return UNLIMITED
    return number


def negative_note(item, raw, value, where):
    """The warning for a negative rlimit value that pam_limits does not read as negative, or None."""
    if item in ('priority', 'nice', 'maxlogins', 'maxsyslogins') or item not in RLIMIT_ITEMS:
        return None
    match = _NUM_RE.match(raw.lower())
    if not match or match.group(1) != '-' or raw in ('-1',):
        return None
    return ("{0}: value '{1}' for item '{2}' is read by pam_limits as {3} (strtoull wraps a negative number "
            "around)".format(where, raw, item, value))


def _parse_range(domain):
    """Return (kind, lo, hi) for uid/gid ranges as parse_uid_range(); kind None = not a range."""
    if ':' not in domain:
        return None, None, None
    body = domain[1:] if domain[:1] in ('@', '%') else domain
    lo_text, hi_text = body.split(':', 1)
    if lo_text == '':
        kind = 'one'
        lo = None
    else:
        if not lo_text.isdigit():
            raise LimitsError("invalid uid range '{0}'".format(domain))
        lo = int(lo_text)
        kind = 'mm'
    if hi_text == '':
        if kind == 'one':
            raise LimitsError("invalid uid range '{0}'".format(domain))
        return 'min', lo, None
    if not hi_text.isdigit():
        raise LimitsError("invalid uid range '{0}'".format(domain))
    hi = int(hi_text)
    if kind == 'one':
        lo = hi
    return kind, lo, hi


def parse_limits_line(text, path='', lineno=0):
    """Parse one limits.conf line; None for blank/comment lines.

    Raises LimitsError for lines pam_limits skips (it logs them and goes on).
    """
    where = '{0}:{1}'.format(path, lineno) if path else 'line {0}'.format(lineno)
    line = text.lstrip()
    line = line.split('#', 1)[0].split('\n', 1)[0]
    fields = line.split()
    if not fields:
        return None
    domain = fields[0]
    try:
        rng = _parse_range(domain)
    except LimitsError as exc:
        raise LimitsError('{0}: {1} - skipped'.format(where, exc))
    entry = {'file': path, 'line': lineno, 'domain': domain, 'type': None, 'item': None, 'value': None,
             'raw_value': None}
    if len(fields) == 2 and fields[1].startswith('-'):
        entry['type'] = '-'
        entry['no_limits'] = True
        return entry
    if len(fields) < 4:
        raise LimitsError("{0}: invalid line '{1}' - skipped (expected '<domain> <type> <item> <value>')".format(
            where, line.strip()))
    ltype, item, value = fields[1].lower(), fields[2].lower(), fields[3].lower()
    if item not in ALL_ITEMS:
        raise LimitsError("{0}: unknown limit item '{1}' (allowed: {2})".format(where, item, ', '.join(ALL_ITEMS)))
    if ltype not in TYPES and item not in ('maxlogins', 'maxsyslogins', 'nonewprivs'):
        raise LimitsError("{0}: unknown limit type '{1}' (allowed: soft, hard, -)".format(where, ltype))
    if rng[0] in ('min', 'mm') and domain.startswith('%'):
        raise LimitsError("{0}: range unsupported for %group matching '{1}' - ignored".format(where, domain))
    entry.update({'type': ltype, 'item': item, 'raw_value': fields[3],
                  'value': parse_value(item, value, where)})
    note = negative_note(item, fields[3], entry['value'], where)
    if note:
        entry['note'] = note
    if len(fields) > 4:
        entry['ignored_fields'] = fields[4:]
    return entry


def parse_limits_conf(text, path=''):
    """Parse a whole file: returns (entries, warnings) where warnings are the skipped lines."""
    entries = []
    warnings = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        try:
            entry = parse_limits_line(raw, path, lineno)
        except LimitsError as exc:
            warnings.append(str(exc))
            continue
        if entry is not None:
            entries.append(entry)
            if entry.get('note'):
                warnings.append(entry['note'])
    return entries, warnings


def parse_proc_limits(text):
    """Parse /proc/<pid>/limits into {item: (soft, hard)} in the kernel's units (bytes, seconds)."""
    by_name = dict((v[1], k) for k, v in RLIMIT_ITEMS.items())
    result = {}
    for line in text.splitlines()[1:]:
        if not line.strip():
            continue
        match = re.match(r'^(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)', line)
        if not match:
            raise LimitsError("unexpected line in /proc limits: '{0}'".format(line.rstrip()))
        item = by_name.get(match.group(1))
        if item is None:
            continue
        pair = []
        for val in match.group(2), match.group(3):
            if val == 'unlimited':
                pair.append(UNLIMITED)
            elif val.isdigit():
                pair.append(int(val))
            else:
                raise LimitsError("unexpected value '{0}' for '{1}' in /proc limits".format(val, match.group(1)))
        result[item] = tuple(pair)
    return result


def kernel_to_conf_units(item, value):
    """Bytes/seconds from the kernel into limits.conf units (KiB, minutes); floor division."""
    if value == UNLIMITED or item not in RLIMIT_ITEMS:
        return value
    if item == 'nice':
        return 20 - value if value else None
    return value // RLIMIT_ITEMS[item][0]


def debian_baseline(proc1_limits):
    """Starting values of Debian's pam_limits: /proc/1/limits, then its built-in fallbacks."""
    base = {}
    for item in RLIMIT_ITEMS:
        if item in proc1_limits:
            soft, hard = [kernel_to_conf_units(item, v) for v in proc1_limits[item]]
            if item == 'nofile' and _is_less(DEBIAN_NOFILE_SOFT_CAP, soft):
                soft = DEBIAN_NOFILE_SOFT_CAP
            base[item] = (soft, hard, SRC_KERNEL, '/proc/1/limits')
        elif item in DEBIAN_FALLBACK:
            soft, hard = DEBIAN_FALLBACK[item]
            base[item] = (soft, hard, SRC_DEFAULT, 'pam_limits default')
    return base


def _matches(entry, user, root_exempt):
    """Return the precedence rank with which entry applies to user, or None."""
    domain = entry['domain']
    is_root = user.get('uid') == 0 and root_exempt
    if domain == user['name']:
        return SRC_USER
    kind, lo, hi = _parse_range(domain)
    if domain.startswith('@'):
        if is_root:
            return None
        if kind is None:
            return SRC_GROUP if domain[1:] in user['groups'] else None
        if kind == 'one':
            return SRC_GROUP if hi in user['gids'] else None
        gid = user.get('gid')
        if gid is None or gid < lo or (kind == 'mm' and gid > hi):
            return None
        return SRC_GROUP
    if domain.startswith('%'):
        if is_root:
            return None
        if domain == '%':
            return SRC_ALL
        if kind is None:
            return SRC_ALLGROUP if domain[1:] in user['groups'] else None
        if kind == 'one':
            return SRC_ALLGROUP if hi in user['gids'] else None
        return None
    if kind is None:
        if domain == '*' and not is_root:
            return SRC_DEFAULT
        return None
    uid = user.get('uid')
    if uid is None:
        return None
    if kind == 'one':
        return SRC_USER if uid == hi else None
    if uid < lo or (kind == 'mm' and uid > hi):
        return None
    return SRC_USER


def evaluate_user(entries, user, root_exempt=False, baseline=None, nr_open=None):
    """Apply entries to one user the way pam_limits does.

    user: {'name', 'uid' (int|None), 'gid' (int|None), 'groups' (set of names), 'gids' (set)}.
    baseline: {item: (soft, hard, rank, origin)} of the starting values (Debian), or None.
    Returns {'items': {item: {'soft', 'hard'}}, 'sources': {item: {'soft', 'hard'}}, 'no_limits': str|None}.
    """
    state = {}
    for item in RLIMIT_ITEMS:
        if baseline and item in baseline:
            soft, hard, rank, origin = baseline[item]
            state[item] = {'soft': soft, 'hard': hard, 'src_soft': rank, 'src_hard': rank,
                           'from_soft': origin, 'from_hard': origin}
        else:
            state[item] = {'soft': None, 'hard': None, 'src_soft': SRC_NONE, 'src_hard': SRC_NONE,
                           'from_soft': None, 'from_hard': None}
    no_limits = None
    for entry in entries:
        where = '{0}:{1}'.format(entry['file'], entry['line'])
        if entry.get('no_limits'):
            # '<domain> -': user, @group and uid ranges only; the Debian root patch does not touch it
            if entry['domain'] == '*' or entry['domain'].startswith('%'):
                continue
            if _matches(entry, user, False) is None:
                continue
            no_limits = where
            break
        rank = _matches(entry, user, root_exempt)
        if rank is None:
            continue
        item = entry['item']
        if item not in RLIMIT_ITEMS or rank in (SRC_ALL, SRC_ALLGROUP):
            continue
        value = entry['value']
        if item == 'nofile' and value == UNLIMITED and nr_open is not None:
            value = nr_open
        if item == 'nice' and value != UNLIMITED:
            value = max(-20, min(19, value))
        cur = state[item]
        if entry['type'] in ('soft', '-'):
            if cur['src_soft'] < rank:
                continue
            cur.update({'soft': value, 'src_soft': rank, 'from_soft': where})
        if entry['type'] in ('hard', '-'):
            if cur['src_hard'] < rank:
                continue
            cur.update({'hard': value, 'src_hard': rank, 'from_hard': where})
    items = {}
    sources = {}
    for item, cur in state.items():
        if no_limits:
            items[item] = {'soft': None, 'hard': None}
            sources[item] = {'soft': None, 'hard': None}
            continue
        soft, hard, from_soft = cur['soft'], cur['hard'], cur['from_soft']
        if soft is not None and hard is not None and item != 'nice' and _is_less(hard, soft):
            # The soft value is the hard one's: it comes from where the hard value does.
            soft, from_soft = hard, cur['from_hard']
        items[item] = {'soft': soft, 'hard': hard}
        sources[item] = {'soft': from_soft, 'hard': cur['from_hard']}
    return {'items': items, 'sources': sources, 'no_limits': no_limits}


# ---------------------------------------------------------------- systemd

_SIZE_SUFFIX = {'': 1, 'B': 1, 'K': 1024, 'M': 1024 ** 2, 'G': 1024 ** 3, 'T': 1024 ** 4,
                'P': 1024 ** 5, 'E': 1024 ** 6}


def parse_systemd_limit(key, value, where=''):
    """Parse a LimitXXX= / DefaultLimitXXX= value into (soft, hard) in limits.conf units.

    ``soft:hard`` or one value for both; ``infinity``; MEMLOCK takes K/M/G/T/P/E (base 1024)
    and is returned in KiB.  An empty value resets the setting: returns None.
    """
    prefix = '{0}: '.format(where) if where else ''
    value = value.strip()
    if value == '':
        return None
    parts = value.split(':')
    if len(parts) > 2:
        raise LimitsError("{0}invalid {1}= value '{2}' (expected 'value' or 'soft:hard')".format(prefix, key, value))
    if len(parts) == 1:
        parts = [parts[0], parts[0]]
    memlock = key.endswith('MEMLOCK')
    result = []
    for part in parts:
        part = part.strip()
        if part == 'infinity':
            result.append(UNLIMITED)
            continue
        match = re.match(r'^(\d+(?:\.\d+)?)\s*([A-Za-z]?)$', part)
        if not match or (match.group(2) and not memlock) or match.group(2).upper() not in _SIZE_SUFFIX:
            raise LimitsError("{0}invalid {1}= value '{2}' (expected a number{3} or infinity)".format(
                prefix, key, part, ', optionally with K, M, G, T, P or E' if memlock else ''))
        number = float(match.group(1)) * _SIZE_SUFFIX[match.group(2).upper()]
        number = int(number)
        if number >= RLIM_INFINITY:
            result.append(UNLIMITED)
        elif memlock:
            result.append(number // 1024)
        else:
            result.append(number)
    return tuple(result)


def parse_systemd_conf(text, path=''):
    """Return [(key, value, path, lineno)] of the [Manager] section of a system.conf file."""
    section = None
    found = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in '#;':
            continue
        if line.startswith('[') and line.endswith(']'):
            section = line[1:-1]
            continue
        if section != 'Manager' or '=' not in line:
            continue
        key, value = line.split('=', 1)
        found.append((key.strip(), value.strip(), path, lineno))
    return found


def systemd_defaults_from_files(files_text):
    """files_text: [(path, text)] in precedence order. Returns {item: {'soft','hard','source'}}."""
    result = {}
    for path, text in files_text:
        for key, value, _path, lineno in parse_systemd_conf(text, path):
            for item, name in SYSTEMD_ITEMS.items():
                if key != 'DefaultLimit' + name:
                    continue
                where = '{0}:{1}'.format(path, lineno)
                pair = parse_systemd_limit(key, value, where)
                if pair is None:
                    result.pop(item, None)
                else:
                    result[item] = {'soft': pair[0], 'hard': pair[1], 'source': where}
    return result


def parse_systemctl_show(text, prefix=''):
    """Parse ``systemctl show -p ...`` output: {item: {soft, hard}} (and 'LoadState' when asked)."""
    props = {}
    for line in text.splitlines():
        if '=' in line:
            key, value = line.split('=', 1)
            props[key.strip()] = value.strip()
    result = {}
    for item, name in SYSTEMD_ITEMS.items():
        hard_key = '{0}Limit{1}'.format(prefix, name)
        soft_key = hard_key + 'Soft'
        if hard_key not in props and soft_key not in props:
            continue
        pair = []
        for key in (soft_key, hard_key):
            raw = props.get(key)
            if raw is None or raw == '':
                pair.append(None)
            elif raw == 'infinity' or (raw.isdigit() and int(raw) >= RLIM_INFINITY):
                pair.append(UNLIMITED)
            elif raw.isdigit():
                pair.append(int(raw) // 1024 if name == 'MEMLOCK' else int(raw))
            else:
                raise LimitsError("systemctl show printed {0}={1}: not a number or infinity".format(key, raw))
        result[item] = {'soft': pair[0], 'hard': pair[1]}
    if 'LoadState' in props:
        result['LoadState'] = props['LoadState']
    return result


# ---------------------------------------------------------------- the limits namespace from what the node read

def _show(value):
    return repr(value) if isinstance(value, str) else str(value)


def _id_value(value, where, kind):
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise LimitsError('{0}: {1} is not a {2} (allowed: an integer 0 or above)'.format(where, _show(value), kind))


def _group_names(value, where, allowed):
    if value is None:
        return []
    if isinstance(value, str):
        return [n.strip() for n in value.split(',') if n.strip()]
    if isinstance(value, (list, tuple)):
        names = []
        for name in value:
            if isinstance(name, bool) or not isinstance(name, (str, int)):
                raise LimitsError('{0}: {1} is not a group name (allowed: {2})'.format(where, _show(name), allowed))
            names.append(str(name).strip())
        return names
    raise LimitsError('{0}: {1} is not a list of group names (allowed: {2})'.format(where, _show(value), allowed))


GROUP_SPEC_KEYS = ('groups', 'uid', 'gid')


def check_groups_option(groups):
    """Validate limits_facts' ``groups`` option: {user: list|str|{groups, uid, gid}} -> {user: {groups, uid, gid}}.

    A string is one group name or a comma-separated list of them (never a list of letters). Raises LimitsError
    naming the user, the key, the value and what is allowed.
    """
    if groups is None:
        return None
    checked = {}
    for user, spec in groups.items():
        where = 'groups.{0}'.format(user)
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - set(GROUP_SPEC_KEYS))
            if unknown:
                raise LimitsError('{0}: unknown key {1} (allowed: {2})'.format(
                    where, ', '.join(repr(k) for k in unknown), ', '.join(GROUP_SPEC_KEYS)))
            checked[user] = {
                'groups': _group_names(spec.get('groups'), where + '.groups',
                                       'a list of group names or a comma-separated string of them'),
                'uid': _id_value(spec.get('uid'), where + '.uid', 'uid'),
                'gid': _id_value(spec.get('gid'), where + '.gid', 'gid'),
            }
        else:
            allowed = ('a list of group names, a comma-separated string of them, or a dict with the keys groups, '
                       'uid and gid')
            checked[user] = {'groups': _group_names(spec, where, allowed), 'uid': None, 'gid': None}
    return checked


def _systemd(read):
    """The ``systemd`` part of the namespace from the manager's files and ``systemctl show`` as read."""
    texts = [(f['path'], f['text']) for f in read['files'] if f['error'] is None]
    errors = [f['error'] for f in read['files'] if f['error']]
    try:
        configured = systemd_defaults_from_files(texts)
    except LimitsError as exc:
        errors.append(str(exc))
        configured = {}
    manager = None if read['manager'] is None else parse_systemctl_show(read['manager'], prefix='Default')
    out = {'default': {}, 'default_source': {}, 'configured': {}, 'config_files': [f['path'] for f in read['files']],
           'manager': manager, 'services': {}, 'service_errors': {}, 'reason': read['reason'], 'errors': errors}
    for item in SYSTEMD_ITEMS:
        if item in configured:
            out['configured'][item] = {'soft': configured[item]['soft'], 'hard': configured[item]['hard']}
            out['default'][item] = dict(out['configured'][item])
            out['default_source'][item] = configured[item]['source']
        elif manager and item in manager:
            out['default'][item], out['default_source'][item] = manager[item], 'manager'
        else:
            out['default'][item], out['default_source'][item] = None, None
    for service, shown in read['services'].items():
        parsed = None if shown['show'] is None else parse_systemctl_show(shown['show'])
        if parsed is not None and parsed.pop('LoadState', None) == 'not-found':
            parsed = None
            shown = dict(shown, error="service '{0}' not found (LoadState=not-found)".format(service))
        out['services'][service] = parsed
        if parsed is None:
            out['service_errors'][service] = shown['error']
    return out


def resolve_slurm(read):
    """The ``slurm`` part: each slurmd's memlock (KiB) and Slurm's MEMLOCK propagation, or None without slurmd."""
    if read is None:
        return None
    slurmd = []
    for proc in read['slurmd']:
        entry = {'pid': proc['pid'], 'memlock': None, 'error': None}
        try:
            pair = parse_proc_limits(proc['limits'] or '').get('memlock')
            if pair is None:
                raise LimitsError('no Max locked memory line')
            entry['memlock'] = dict(zip(('soft', 'hard'), [kernel_to_conf_units('memlock', v) for v in pair]))
        except LimitsError as exc:
            entry['error'] = '/proc/{0}/limits: cannot be read: {1}'.format(proc['pid'], exc)
        slurmd.append(entry)
    out = {'slurmd': slurmd, 'config': None, 'memlock_propagated': None, 'error': read['config_error']}
    if read['config'] is not None:
        try:
            out['config'] = _slurm_config.parse_show_config(read['config'])
            out['memlock_propagated'] = _slurm_config.propagated(out['config'], 'MEMLOCK')
        except ValueError as exc:
            out['error'] = str(exc)
    return out


def resolve(read, flavour='auto'):
    """The ``limits`` namespace (limits_facts' RETURN) from what collect/_limits.read_limits read on the node.

    Raises LimitsError for an unknown user and for output that cannot be understood; a file that could not be read
    is an entry of ``errors`` naming it (the limits a login gets cannot be known then).
    """
    if flavour == 'auto':
        flavour = 'debian' if read['debian'] else 'upstream'
    entries, warnings, errors = [], [], []
    for record in read['files']:
        if record.get('not_utf8'):
            warnings.append('{0}: the file name is not UTF-8 (shown with \\x escapes); pam_limits reads '
                            'it'.format(record['path']))
        if record['error']:
            errors.append(record['error'])
            continue
        found, bad = parse_limits_conf(record['text'], record['path'])
        entries.extend(found)
        warnings.extend(bad)
    nr_open = read['nr_open'].strip() if read['nr_open'] else ''
    nr_open = int(nr_open) if nr_open.isdigit() else None
    baseline = None
    if flavour == 'debian':
        baseline = debian_baseline(parse_proc_limits(read['proc1_limits']) if read['proc1_limits'] else {})
    effective, sources, no_limits = {}, {}, {}
    for name, account in read['accounts'].items():
        if account is None:
            raise LimitsError("user '{0}' given in users does not exist on this host (pwd lookup failed); pass its "
                              "groups in 'groups' to evaluate it anyway".format(name))
        user = dict(account, name=None if name == ANY_USER else name, groups=set(account['groups']),
                    gids=set(account['gids']))
        result = evaluate_user(entries, user, root_exempt=(flavour == 'debian'), baseline=baseline, nr_open=nr_open)
        effective[name], sources[name] = result['items'], result['sources']
        if result['no_limits']:
            no_limits[name] = result['no_limits']
    systemd = _systemd(read['systemd'])
    return {
        'entries': [dict((k, e.get(k)) for k in ('file', 'line', 'domain', 'type', 'item', 'value')) for e in entries],
        'files': [record['path'] for record in read['files']],
        'warnings': warnings,
        'errors': errors + systemd['errors'],
        'flavour': flavour,
        'effective': effective,
        'sources': sources,
        'no_limits': no_limits,
        'systemd': systemd,
        'slurm': resolve_slurm(read.get('slurm')),
    }
