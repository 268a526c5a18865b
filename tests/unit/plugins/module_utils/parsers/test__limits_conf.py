# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ctypes
import ctypes.util
import os
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _limits as C
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _limits_conf as L

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

HOST = os.path.join(FIXTURES, 'host')

ALICE = {'name': 'alice', 'uid': 1000, 'gid': 1000, 'groups': {'alice', 'gpu'}, 'gids': {1000, 2000}}
BOB = {'name': 'bob', 'uid': 1001, 'gid': 1001, 'groups': {'bob'}, 'gids': {1001}}
ROOT = {'name': 'root', 'uid': 0, 'gid': 0, 'groups': {'root'}, 'gids': {0}}


def read(name):
    with open(os.path.join(HOST, name)) as handle:
        return handle.read()


def entries_of(text, path='/etc/security/limits.conf'):
    entries, warnings = L.parse_limits_conf(textwrap.dedent(text), path)
    assert warnings == []
    return entries


def memlock(text, user, **kwargs):
    result = L.evaluate_user(entries_of(text), user, **kwargs)
    return result['items']['memlock']


# ------------------------------------------------------------------ parser

def test_stock_debian12_has_no_entries():
    entries, warnings = L.parse_limits_conf(read('limits.conf.debian12'), '/etc/security/limits.conf')
    assert entries == []
    assert warnings == []


def test_stock_el9_nproc_dropin():
    entries, warnings = L.parse_limits_conf(read('limits.d.el9/20-nproc.conf'), '/etc/security/limits.d/20-nproc.conf')
    assert warnings == []
    assert [(e['line'], e['domain'], e['type'], e['item'], e['value']) for e in entries] == [
        (5, '*', 'soft', 'nproc', 4096),
        (6, 'root', 'soft', 'nproc', 'unlimited'),
    ]


@pytest.mark.parametrize('line, expected', [
    ('*   -   memlock   unlimited', ('*', '-', 'memlock', 'unlimited')),
    ('@gpu hard memlock infinity  # trailing comment', ('@gpu', 'hard', 'memlock', 'unlimited')),
    ('train SOFT MEMLOCK -1', ('train', 'soft', 'memlock', 'unlimited')),
    ('train soft memlock -', ('train', 'soft', 'memlock', 'unlimited')),
    ('train soft memlock 1048576kb', ('train', 'soft', 'memlock', 1048576)),
    ('train hard memlock 18014398509481983', ('train', 'hard', 'memlock', 'unlimited')),
    ('train hard memlock 18014398509481982', ('train', 'hard', 'memlock', 18014398509481982)),
    ('train hard cpu 307445734561825860', ('train', 'hard', 'cpu', 'unlimited')),
    ('train soft nice -25', ('train', 'soft', 'nice', -20)),
    ('train soft priority -1', ('train', 'soft', 'priority', -1)),
    ('1000: hard nofile 65536', ('1000:', 'hard', 'nofile', 65536)),
    ('@:2000 hard nofile 65536', ('@:2000', 'hard', 'nofile', 65536)),
    ('%gpu - maxlogins 4', ('%gpu', '-', 'maxlogins', 4)),
    ('ftp - chroot /ftp', ('ftp', '-', 'chroot', '/ftp')),
    ('*\tsoft\tnofile\t1024\textra', ('*', 'soft', 'nofile', 1024)),
    # process_limit(): strtoull wraps a negative number; KiB and minute items then overflow to unlimited
    ('* soft memlock -5', ('*', 'soft', 'memlock', 'unlimited')),
    ('* hard cpu -2', ('*', 'hard', 'cpu', 'unlimited')),
    ('* hard nofile -2', ('*', 'hard', 'nofile', 2 ** 64 - 2)),
    ('* hard nofile -0', ('*', 'hard', 'nofile', 0)),
    ('* hard nproc -18446744073709551616', ('*', 'hard', 'nproc', 'unlimited')),
    ('* hard nproc 99999999999999999999999', ('*', 'hard', 'nproc', 'unlimited')),
    ('* hard nofile +12x', ('*', 'hard', 'nofile', 12)),
    ('* - maxlogins -99999999999', ('*', '-', 'maxlogins', -2 ** 31)),
])
def test_parse_line_ok(line, expected):
    entry = L.parse_limits_line(line, '/etc/security/limits.d/90-x.conf', 3)
    assert (entry['domain'], entry['type'], entry['item'], entry['value']) == expected
    assert (entry['file'], entry['line']) == ('/etc/security/limits.d/90-x.conf', 3)


@pytest.mark.parametrize('line', ['', '   ', '# just a comment', '   #*  soft core 0'])
def test_parse_line_blank(line):
    assert L.parse_limits_line(line, 'f', 1) is None


def test_parse_line_no_limits():
    entry = L.parse_limits_line('backup -', 'f', 2)
    assert entry['no_limits'] is True and entry['domain'] == 'backup' and entry['type'] == '-'


@pytest.mark.parametrize('line, message', [
    ('* soft memlock', "f:4: invalid line '* soft memlock' - skipped (expected '<domain> <type> <item> <value>')"),
    ('* soft', "f:4: invalid line '* soft' - skipped (expected '<domain> <type> <item> <value>')"),
    ('* soft memlok 10', "f:4: unknown limit item 'memlok' (allowed: as, core, cpu, data, fsize, locks, memlock, "
                         "msgqueue, nice, nofile, nproc, rss, rtprio, sigpending, stack, maxlogins, maxsyslogins, "
                         "priority, nonewprivs, chroot)"),
    ('* both memlock 10', "f:4: unknown limit type 'both' (allowed: soft, hard, -)"),
    ('* soft memlock lots', "f:4: wrong limit value 'lots' for item 'memlock' "
                            "(allowed: a number, -1, -, unlimited, infinity)"),
    ('* soft nonewprivs yes', "f:4: wrong limit value 'yes' for item 'nonewprivs' (allowed: 0, 1)"),
    ('x1:y soft core 0', "f:4: invalid uid range 'x1:y' - skipped"),
    (':  soft core 0', "f:4: invalid uid range ':' - skipped"),
    ('%10:20 - maxlogins 2', "f:4: range unsupported for %group matching '%10:20' - ignored"),
])
def test_parse_line_errors(line, message):
    with pytest.raises(L.LimitsError) as exc:
        L.parse_limits_line(line, 'f', 4)
    assert str(exc.value) == message


def test_negative_value_warns_how_pam_limits_reads_it():
    entries, warnings = L.parse_limits_conf('* hard nofile -2\n* soft memlock -1\n* soft nice -5\n', 'x.conf')
    assert [e['value'] for e in entries] == [2 ** 64 - 2, 'unlimited', -5]
    assert warnings == ["x.conf:1: value '-2' for item 'nofile' is read by pam_limits as 18446744073709551614 "
                        "(strtoull wraps a negative number around)"]


def test_parse_file_collects_warnings():
    entries, warnings = L.parse_limits_conf('* soft memlock 64\n* soft bogus 1\n', 'x.conf')
    assert len(entries) == 1
    assert warnings == ["x.conf:2: unknown limit item 'bogus' (allowed: as, core, cpu, data, fsize, locks, memlock, "
                        "msgqueue, nice, nofile, nproc, rss, rtprio, sigpending, stack, maxlogins, maxsyslogins, "
                        "priority, nonewprivs, chroot)"]


# ------------------------------------------------------------------ precedence

@pytest.mark.parametrize('conf, user, expected', [
    # a user line beats a group line beats '*', whatever the order
    ('alice - memlock 100\n@gpu - memlock 200\n* - memlock 300\n', ALICE, {'soft': 100, 'hard': 100}),
    ('* - memlock 300\n@gpu - memlock 200\nalice - memlock 100\n', ALICE, {'soft': 100, 'hard': 100}),
    ('* - memlock 300\n@gpu - memlock 200\n', ALICE, {'soft': 200, 'hard': 200}),
    ('* - memlock 300\n@gpu - memlock 200\n', BOB, {'soft': 300, 'hard': 300}),
    # same rank: the later line wins
    ('* - memlock 300\n* - memlock 400\n', BOB, {'soft': 400, 'hard': 400}),
    # uid ranges count as user lines
    ('1000:1001 - memlock 50\n* - memlock 300\n', BOB, {'soft': 50, 'hard': 50}),
    ('1000: - memlock 50\n', BOB, {'soft': 50, 'hard': 50}),
    (':1000 - memlock 50\n', BOB, {'soft': None, 'hard': None}),
    (':1000 - memlock 50\n', ALICE, {'soft': 50, 'hard': 50}),
    # gid exact matches supplementary groups, gid range only the primary group
    ('@:2000 - memlock 60\n', ALICE, {'soft': 60, 'hard': 60}),
    ('@2000:2999 - memlock 60\n', ALICE, {'soft': None, 'hard': None}),
    ('@1000:1000 - memlock 60\n', ALICE, {'soft': 60, 'hard': 60}),
    # '%' is for maxlogins only
    ('%gpu - memlock 10\n%  - memlock 10\n', ALICE, {'soft': None, 'hard': None}),
    # soft above hard is clamped down
    ('alice soft memlock 900\nalice hard memlock 800\n', ALICE, {'soft': 800, 'hard': 800}),
    ('alice soft memlock unlimited\nalice hard memlock 800\n', ALICE, {'soft': 800, 'hard': 800}),
    # '-': a stronger soft makes pam_limits skip the hard half too (it returns early)
    ('alice soft memlock 100\n* - memlock 300\n', ALICE, {'soft': 100, 'hard': None}),
    ('alice hard memlock 100\n* - memlock 50\n', ALICE, {'soft': 50, 'hard': 100}),
])
def test_precedence(conf, user, expected):
    assert memlock(conf, user) == expected


def test_later_file_overrides_same_rank_only():
    entries = (entries_of('* - memlock 300\nalice - memlock 100\n', '/etc/security/limits.conf')
               + entries_of('* - memlock unlimited\n', '/etc/security/limits.d/90-nodeprep.conf'))
    alice = L.evaluate_user(entries, ALICE)
    bob = L.evaluate_user(entries, BOB)
    assert alice['items']['memlock'] == {'soft': 100, 'hard': 100}
    assert alice['sources']['memlock'] == {'soft': '/etc/security/limits.conf:2', 'hard': '/etc/security/limits.conf:2'}
    assert bob['items']['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited'}
    assert bob['sources']['memlock'] == {'soft': '/etc/security/limits.d/90-nodeprep.conf:1',
                                         'hard': '/etc/security/limits.d/90-nodeprep.conf:1'}


@pytest.mark.parametrize('root_exempt, expected', [
    (False, {'soft': 300, 'hard': 300}),
    (True, {'soft': None, 'hard': None}),
])
def test_root_and_wildcards(root_exempt, expected):
    conf = '* - memlock 300\n@root - memlock 200\n'
    assert memlock(conf, ROOT, root_exempt=root_exempt) == ({'soft': 200, 'hard': 200} if not root_exempt
                                                            else expected)
    assert memlock('* - memlock 300\n', ROOT, root_exempt=root_exempt) == expected


def test_root_by_name_applies_on_debian():
    assert memlock('* - memlock 300\nroot - memlock 400\n', ROOT, root_exempt=True) == {'soft': 400, 'hard': 400}


def test_no_limits_line_stops_everything():
    entries = entries_of('alice - memlock 100\n@gpu -\n* - nofile 10\n')
    result = L.evaluate_user(entries, ALICE)
    assert result['no_limits'] == '/etc/security/limits.conf:2'
    assert result['items']['memlock'] == {'soft': None, 'hard': None}
    other = L.evaluate_user(entries, BOB)
    assert other['no_limits'] is None
    assert other['items']['nofile'] == {'soft': 10, 'hard': 10}


def test_wildcard_no_limits_line_is_ignored():
    result = L.evaluate_user(entries_of('* -\n* - memlock 5\n'), BOB)
    assert result['no_limits'] is None
    assert result['items']['memlock'] == {'soft': 5, 'hard': 5}


def test_nofile_unlimited_becomes_nr_open():
    result = L.evaluate_user(entries_of('* - nofile unlimited\n'), BOB, nr_open=1048576)
    assert result['items']['nofile'] == {'soft': 1048576, 'hard': 1048576}


def test_el9_stock_files():
    entries = (L.parse_limits_conf(read('limits.conf.el9'), '/etc/security/limits.conf')[0]
               + L.parse_limits_conf(read('limits.d.el9/20-nproc.conf'), '/etc/security/limits.d/20-nproc.conf')[0])
    assert L.evaluate_user(entries, ROOT)['items']['nproc'] == {'soft': 'unlimited', 'hard': None}
    assert L.evaluate_user(entries, BOB)['items']['nproc'] == {'soft': 4096, 'hard': None}


def test_debian_baseline_from_proc1():
    proc1 = L.parse_proc_limits(read('proc1-limits.systemd252'))
    assert proc1['memlock'] == (8388608, 8388608)
    assert proc1['nofile'] == (1073741816, 1073741816)
    assert proc1['cpu'] == ('unlimited', 'unlimited')
    base = L.debian_baseline(proc1)
    assert base['memlock'] == (8192, 8192, L.SRC_KERNEL, '/proc/1/limits')
    assert base['nofile'] == (1024, 1073741816, L.SRC_KERNEL, '/proc/1/limits')
    assert base['stack'] == (8192, 'unlimited', L.SRC_KERNEL, '/proc/1/limits')
    result = L.evaluate_user(entries_of('* - memlock unlimited\n'), ROOT, root_exempt=True, baseline=base)
    assert result['items']['memlock'] == {'soft': 8192, 'hard': 8192}
    assert result['sources']['memlock'] == {'soft': '/proc/1/limits', 'hard': '/proc/1/limits'}
    result = L.evaluate_user(entries_of('* - memlock unlimited\n'), BOB, root_exempt=True, baseline=base)
    assert result['items']['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited'}


def test_debian_fallbacks_without_proc1():
    base = L.debian_baseline({})
    assert base['memlock'] == (64, 64, L.SRC_DEFAULT, 'pam_limits default')
    assert base['nofile'] == (1024, 1024, L.SRC_DEFAULT, 'pam_limits default')


def test_parse_proc_limits_error():
    with pytest.raises(L.LimitsError) as exc:
        L.parse_proc_limits('Limit  Soft Limit  Hard Limit  Units\nMax open files            lots                 1 files\n')
    assert str(exc.value) == "unexpected value 'lots' for 'Max open files' in /proc limits"


def test_limits_files_c_order(tmp_path):
    d = tmp_path / 'etc' / 'security' / 'limits.d'
    d.mkdir(parents=True)
    for name in ('b.conf', 'B.conf', '10-a.conf', '9-z.conf', 'skip.txt'):
        (d / name).write_text(u'')
    names = [os.path.basename(p) for p in C.limits_files(str(tmp_path))]
    assert names == ['limits.conf', '10-a.conf', '9-z.conf', 'B.conf', 'b.conf']


# ------------------------------------------------------------------ systemd

@pytest.mark.parametrize('key, value, expected', [
    ('DefaultLimitMEMLOCK', 'infinity', ('unlimited', 'unlimited')),
    ('DefaultLimitMEMLOCK', '8M', (8192, 8192)),
    ('DefaultLimitMEMLOCK', '64K:infinity', (64, 'unlimited')),
    ('DefaultLimitMEMLOCK', '1G', (1048576, 1048576)),
    ('DefaultLimitMEMLOCK', '8388608', (8192, 8192)),
    ('DefaultLimitNOFILE', '1024:524288', (1024, 524288)),
    ('LimitMEMLOCK', '', None),
])
def test_parse_systemd_limit(key, value, expected):
    assert L.parse_systemd_limit(key, value) == expected


@pytest.mark.parametrize('key, value, message', [
    ('DefaultLimitMEMLOCK', '1:2:3', "x:1: invalid DefaultLimitMEMLOCK= value '1:2:3' (expected 'value' or 'soft:hard')"),
    ('DefaultLimitMEMLOCK', 'lots', "x:1: invalid DefaultLimitMEMLOCK= value 'lots' "
                                    "(expected a number, optionally with K, M, G, T, P or E or infinity)"),
    ('DefaultLimitNOFILE', '4K', "x:1: invalid DefaultLimitNOFILE= value '4K' (expected a number or infinity)"),
])
def test_parse_systemd_limit_errors(key, value, message):
    with pytest.raises(L.LimitsError) as exc:
        L.parse_systemd_limit(key, value, 'x:1')
    assert str(exc.value) == message


def test_systemd_precedence(tmp_path):
    def put(rel, text):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    put('etc/systemd/system.conf', u'[Manager]\n#DefaultLimitMEMLOCK=\nDefaultLimitMEMLOCK=64K\n')
    put('usr/lib/systemd/system.conf.d/50-vendor.conf', u'[Manager]\nDefaultLimitMEMLOCK=8M\n')
    put('usr/lib/systemd/system.conf.d/60-hidden.conf', u'[Manager]\nDefaultLimitMEMLOCK=1M\n')
    put('etc/systemd/system.conf.d/60-hidden.conf', u'[Manager]\nDefaultLimitNOFILE=4096:8192\n')
    put('run/systemd/system.conf.d/70-gpu.conf', u'[Manager]\nDefaultLimitMEMLOCK=infinity\n[Other]\nDefaultLimitMEMLOCK=1\n')
    files = C.systemd_conf_files(str(tmp_path))
    rel = [os.path.relpath(p, str(tmp_path)) for p in files]
    assert rel == ['etc/systemd/system.conf', 'usr/lib/systemd/system.conf.d/50-vendor.conf',
                   'etc/systemd/system.conf.d/60-hidden.conf', 'run/systemd/system.conf.d/70-gpu.conf']
    texts = [(p, open(p).read()) for p in files]
    result = L.systemd_defaults_from_files(texts)
    assert result['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited',
                                 'source': os.path.join(str(tmp_path), 'run/systemd/system.conf.d/70-gpu.conf') + ':2'}
    assert (result['nofile']['soft'], result['nofile']['hard']) == (4096, 8192)


def test_systemd_empty_value_resets():
    result = L.systemd_defaults_from_files([('a', '[Manager]\nDefaultLimitMEMLOCK=1M\n'),
                                            ('b', '[Manager]\nDefaultLimitMEMLOCK=\n')])
    assert result == {}


@pytest.mark.parametrize('text, prefix, expected', [
    ('LimitMEMLOCK=infinity\nLimitMEMLOCKSoft=infinity\nLimitNOFILE=524288\nLimitNOFILESoft=1024\nLoadState=loaded\n',
     '', {'memlock': {'soft': 'unlimited', 'hard': 'unlimited'}, 'nofile': {'soft': 1024, 'hard': 524288},
          'LoadState': 'loaded'}),
    ('LimitMEMLOCK=8388608\nLimitMEMLOCKSoft=65536\n', '', {'memlock': {'soft': 64, 'hard': 8192}}),
    ('DefaultLimitMEMLOCK=18446744073709551615\nDefaultLimitMEMLOCKSoft=18446744073709551615\n', 'Default',
     {'memlock': {'soft': 'unlimited', 'hard': 'unlimited'}}),
])
def test_parse_systemctl_show(text, prefix, expected):
    assert L.parse_systemctl_show(text, prefix) == expected


def test_parse_systemctl_show_error():
    with pytest.raises(L.LimitsError) as exc:
        L.parse_systemctl_show('LimitMEMLOCK=lots\n')
    assert str(exc.value) == 'systemctl show printed LimitMEMLOCK=lots: not a number or infinity'


# ------------------------------------------------------------------ against the real pam_limits

PAM_PROBE = r'''
import ctypes, ctypes.util, resource, sys
pam = ctypes.CDLL(ctypes.util.find_library('pam'))
CONV = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
class PamConv(ctypes.Structure):
    _fields_ = [('conv', CONV), ('appdata', ctypes.c_void_p)]
conv = PamConv(CONV(lambda n, m, r, a: 0), None)
handle = ctypes.c_void_p()
if pam.pam_start_confdir(b'probe', sys.argv[2].encode(), ctypes.byref(conv), sys.argv[1].encode(),
                         ctypes.byref(handle)) != 0:
    sys.exit(3)
rc = pam.pam_open_session(handle, 0)
print(rc, *resource.getrlimit(resource.RLIMIT_MEMLOCK))
'''


def _pam_usable():
    name = ctypes.util.find_library('pam')
    return (os.geteuid() == 0 and name is not None and hasattr(ctypes.CDLL(name), 'pam_start_confdir')
            and os.path.exists('/lib/x86_64-linux-gnu/security/pam_limits.so'))


@pytest.mark.skipif(not _pam_usable(), reason='needs root, libpam with pam_start_confdir and pam_limits.so')
@pytest.mark.parametrize('conf, user', [
    ('postgres soft memlock 100\npostgres hard memlock 4000\n* - memlock 200\n', 'postgres'),
    ('postgres hard memlock 100\n* - memlock 50\n', 'postgres'),
    ('* - memlock 200\n@postgres - memlock 300\n* hard memlock 1000\n', 'postgres'),
    ('1:200 hard memlock 400\n* - memlock 100\npostgres soft memlock 150\n', 'postgres'),
    ('* soft memlock 128\nroot - memlock 256\n', 'root'),
])
def test_matches_real_pam_limits(tmp_path, conf, user):
    """Run the system's pam_limits.so on a conf= file and compare with the evaluator.

    Only values at or below the current memlock limit are used, so setrlimit succeeds.
    """
    limits = tmp_path / 'limits.conf'
    limits.write_text(conf)
    (tmp_path / 'probe').write_text(u'session required pam_limits.so conf={0}\n'.format(limits))
    out = subprocess.check_output([sys.executable, '-c', PAM_PROBE, str(tmp_path), user]).decode().split()
    import pwd
    import grp
    pw = pwd.getpwnam(user)
    groups = set(g.gr_name for g in grp.getgrall() if g.gr_gid == pw.pw_gid or user in g.gr_mem)
    info = {'name': user, 'uid': pw.pw_uid, 'gid': pw.pw_gid, 'groups': groups,
            'gids': set(grp.getgrnam(g).gr_gid for g in groups)}
    base = L.debian_baseline(L.parse_proc_limits(open('/proc/1/limits').read()))
    entries = L.parse_limits_conf(conf, str(limits))[0]
    mine = L.evaluate_user(entries, info, root_exempt=True, baseline=base)['items']['memlock']
    assert out[0] == '0'
    assert [int(out[1]) // 1024, int(out[2]) // 1024] == [mine['soft'], mine['hard']]


ANY_USER = {'name': None, 'uid': None, 'gid': None, 'groups': set(), 'gids': set()}


@pytest.mark.skipif(not _pam_usable(), reason='needs root, libpam with pam_start_confdir and pam_limits.so')
@pytest.mark.parametrize('conf', [
    '*\t-\tmemlock\t4096\nroot\t-\tmemlock\t4096\n* hard memlock 64\n',
    '* soft memlock 128\n* hard memlock 2048\n@root - memlock 256\nroot - memlock 512\n0:10 hard memlock 16\n',
    '*\t-\tmemlock\t300\n%nogroup hard memlock 100\n',
])
def test_any_user_is_what_pam_limits_gives_a_user_no_line_names(tmp_path, conf):
    """The account that stands for ``*`` (ANY_USER: no name, uid or group) resolves as the real pam_limits.so does
    for ``nobody``, whom no line of these files names (the role's verification of ``*``).  Every case sets the hard
    value at or below the current limit, so that setrlimit succeeds."""
    limits = tmp_path / 'limits.conf'
    limits.write_text(conf)
    (tmp_path / 'probe').write_text(u'session required pam_limits.so conf={0}\n'.format(limits))
    out = subprocess.check_output([sys.executable, '-c', PAM_PROBE, str(tmp_path), 'nobody']).decode().split()
    base = L.debian_baseline(L.parse_proc_limits(open('/proc/1/limits').read()))
    entries = L.parse_limits_conf(conf, str(limits))[0]
    mine = L.evaluate_user(entries, ANY_USER, root_exempt=True, baseline=base)['items']['memlock']
    assert out[0] == '0'
    assert [int(out[1]) // 1024, int(out[2]) // 1024] == [mine['soft'], mine['hard']]
