# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shm role's plan (plugins/module_utils/plans/_plan_shm.py): facts + settings -> plan, the readiness check shm.size
read from the same plan, and the idempotence of what the plan applies.

Expected sizes are written by hand (64 GiB = 68719476736 bytes, ...), not computed with the collection's code."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import re

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_shm as S
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._readiness import plan_check
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement

G = 1024 ** 3
T = 1024 ** 4
H100_MIB = 81559           # memory_total_mib of one H100 SXM 80GB (the fixture's value)

SETTINGS = dict((name, spec.get('default')) for name, spec in S.SETTINGS.items())


def line(size_bytes, options=('nosuid', 'nodev'), size_opt=None, unlimited=False):
    opts = list(options) + ([size_opt] if size_opt else [])
    return {'options': opts, 'size_bytes': size_bytes, 'size_explicit': True, 'unlimited': unlimited,
            'vfstype': 'tmpfs', 'spec': 'tmpfs', 'line': 3}


def shm(size_bytes, fstab=None, unlimited=False, free=None, ram=2 * T, errors=()):
    return {'path': '/dev/shm', 'mounted': True, 'fstype': 'tmpfs', 'size_bytes': None if unlimited else size_bytes,
            'unlimited': unlimited, 'free_bytes': free, 'fstab': fstab, 'ram_bytes': ram, 'swap_bytes': 0,
            'default_size_bytes': ram // 2 if ram else None, 'errors': list(errors)}


def facts(shm_facts, gpus_mib=(), gathered=('shm', 'nvidia')):
    gpus = [{'index': i, 'memory_total_mib': mib} for i, mib in enumerate(gpus_mib)]
    return {'nodeprep_gathered': list(gathered), 'shm': shm_facts,
            'nvidia': {'present': bool(gpus), 'gpus': gpus, 'error': None if gpus else 'no GPU'},
            'kernel_state': {'pci': {'gpu_count': len(gpus)}}}


def make(node, **settings):
    return S.plan(node, dict(SETTINGS, **settings), _plan.new_context(host='gpu-a01'))


RIGHT_64G = shm(64 * G, line(64 * G, size_opt='size=64g'))

# name, facts, settings, expected reasons, expected fstab opts (None: no fstab task), live opts, reports count
CASES = [
    ('the wanted size live and in fstab changes nothing', facts(RIGHT_64G), {'nodeprep_shm_size': '64G'},
     [], None, None, 0),
    ('tmpfs default (half of a 2 TiB node) is kept, and written to fstab',
     facts(shm(1 * T)), {'nodeprep_shm_size': '64G'},
     ['no /dev/shm line in fstab'], 'nosuid,nodev,size=1024g', None, 1),
    ('the larger live size already in fstab changes nothing',
     facts(shm(1 * T, line(1 * T, size_opt='size=1024g'))), {'nodeprep_shm_size': '64G'}, [], None, None, 1),
    ('an fstab size below the larger live size is raised to the live size',
     facts(shm(1 * T, line(64 * G, size_opt='size=64g'))), {'nodeprep_shm_size': '64G'},
     ['fstab: /dev/shm is 64.0 GiB in fstab, wanted 1.0 TiB'], 'nosuid,nodev,size=1024g', None, 1),
    ('with nodeprep_shm_shrink both get the wanted size',
     facts(shm(1 * T)), {'nodeprep_shm_size': '64G', 'nodeprep_shm_shrink': True},
     ['live: /dev/shm is 1.0 TiB, wanted 64.0 GiB', 'no /dev/shm line in fstab'], 'nosuid,nodev,size=64g',
     'size=64g', 0),
    ('a smaller live size grows to the wanted size (fstab already right)',
     facts(shm(32 * G, line(64 * G, size_opt='size=64g'))), {'nodeprep_shm_size': '64G'},
     ['live: /dev/shm is 32.0 GiB, wanted 64.0 GiB'], None, 'size=64g', 0),
    ('remount and fstab off change nothing even when smaller (the live size is reported, not changed)',
     facts(shm(32 * G)), {'nodeprep_shm_size': '64G', 'nodeprep_shm_remount': False, 'nodeprep_shm_fstab': False},
     [], None, None, 0),
    # The disagreement of issue #22: an unlimited live tmpfs and no fstab line. Live is kept (larger than any size);
    # without a line the next boot gives half of RAM, so fstab gets the wanted size; readiness fails until then.
    ('an unlimited live tmpfs without an fstab line keeps live, and fstab gets the wanted size',
     facts(shm(None, unlimited=True)), {'nodeprep_shm_size': '64G'},
     ['no /dev/shm line in fstab'], 'nosuid,nodev,size=64g', None, 1),
    ('an unlimited live tmpfs with an unlimited fstab line changes nothing',
     facts(shm(None, line(None, size_opt='size=0', unlimited=True), unlimited=True)), {'nodeprep_shm_size': '64G'},
     [], None, None, 1),
    ('an unlimited tmpfs with nodeprep_shm_shrink gets the wanted size',
     facts(shm(None, line(None, options=('defaults',), size_opt='size=0', unlimited=True), unlimited=True)),
     {'nodeprep_shm_size': '64G', 'nodeprep_shm_shrink': True},
     ['live: /dev/shm is unlimited, wanted 64.0 GiB', 'fstab: /dev/shm is unlimited in fstab, wanted 64.0 GiB',
      'fstab: the /dev/shm line lacks nosuid,nodev'], 'nosuid,nodev,size=64g', 'size=64g', 0),
    ('live larger than wanted with a smaller fstab line: fstab gets the live size',
     facts(shm(128 * G, line(64 * G, size_opt='size=64g'))), {'nodeprep_shm_size': '64G'},
     ['fstab: /dev/shm is 64.0 GiB in fstab, wanted 128.0 GiB'], 'nosuid,nodev,size=128g', None, 1),
    ('an fstab line that keeps more than wanted is kept; a missing option is added with its size',
     facts(shm(64 * G, line(256 * G, options=('nosuid',), size_opt='size=256g'))), {'nodeprep_shm_size': '64G'},
     ['fstab: the /dev/shm line lacks nodev'], 'nosuid,nodev,size=256g', None, 0),
    ('derived from 8 H100s: 0.5 x 637.2 GiB rounded up to 319 GiB',
     facts(shm(64 * G, line(64 * G, size_opt='size=64g')), gpus_mib=[H100_MIB] * 8), {},
     ['live: /dev/shm is 64.0 GiB, wanted 319.0 GiB', 'fstab: /dev/shm is 64.0 GiB in fstab, wanted 319.0 GiB'],
     'nosuid,nodev,size=319g', 'size=319g', 0),
    ('derived below the floor: nodeprep_shm_min_size (64G) wins',
     facts(RIGHT_64G, gpus_mib=[16384]), {}, [], None, None, 0),
]


@pytest.mark.parametrize('name, node, settings, reasons, fstab_opts, live_opts, reports', CASES,
                         ids=[case[0] for case in CASES])
def test_plan(name, node, settings, reasons, fstab_opts, live_opts, reports):
    plan = make(node, **settings)
    assert plan['problems'] == [] and plan['errors'] == []
    assert plan['reasons'] == reasons
    assert (plan['args'].get('fstab') or {}).get('opts') == fstab_opts
    assert (plan['args'].get('live') or {}).get('opts') == live_opts
    assert len(plan['reports']) == reports
    if fstab_opts:
        assert plan['args']['fstab'] == {'path': '/dev/shm', 'src': 'tmpfs', 'fstype': 'tmpfs', 'opts': fstab_opts,
                                         'state': 'present', 'fstab': '/etc/fstab'}
    if live_opts:
        assert plan['args']['live'] == {'path': '/dev/shm', 'opts': live_opts, 'state': 'remounted'}


@pytest.mark.parametrize('name, node, settings, reasons, fstab_opts, live_opts, reports', CASES,
                         ids=[case[0] for case in CASES])
def test_readiness_agrees_with_the_plan(name, node, settings, reasons, fstab_opts, live_opts, reports):
    plan = _plan.finish(make(node, **settings))
    status = plan_check('shm.size', plan)['status']
    if settings.get('nodeprep_shm_remount') is False and reasons == [] and node['shm']['size_bytes'] == 32 * G:
        assert status == 'warn'   # the live size is not managed: reported, not failed
    else:
        assert (plan['reasons'] == []) == (status == 'pass')


def apply(node, plan):
    """What the role's two mount tasks do to the node's shm facts."""
    node = copy.deepcopy(node)
    got = node['shm']
    if 'live' in plan['args']:
        got['size_bytes'] = plan['args']['target']
        got['unlimited'] = False
    if 'fstab' in plan['args']:
        opts = plan['args']['fstab']['opts'].split(',')
        size = [o for o in opts if o.startswith('size=')][0][5:]
        unit = {'g': G, 'm': 1024 ** 2, 'k': 1024}[size[-1]] if size != '0' else 0
        written = int(size[:-1]) * unit if unit else None
        got['fstab'] = {'options': opts, 'size_bytes': written, 'size_explicit': True, 'unlimited': size == '0',
                        'vfstype': 'tmpfs', 'spec': 'tmpfs', 'line': 1}
    return node


@pytest.mark.parametrize('name, node, settings, reasons, fstab_opts, live_opts, reports', CASES,
                         ids=[case[0] for case in CASES])
def test_applying_the_plan_leaves_nothing_to_do(name, node, settings, reasons, fstab_opts, live_opts, reports):
    again = make(apply(node, make(node, **settings)), **settings)
    assert again['reasons'] == []
    assert _plan.fixable_drift(again) == []


def test_the_issue_case_fails_readiness_until_fstab_is_written():
    node = facts(shm(None, unlimited=True))
    before = _plan.finish(make(node, nodeprep_shm_size='64G'))
    check = plan_check('shm.size', before)
    assert check['status'] == 'fail'
    assert check['observed'] == ('live unlimited, no fstab line (the next boot gives the tmpfs default, half of RAM: '
                                 '1.0 TiB); no /dev/shm line in fstab')
    after = _plan.finish(make(apply(node, before), nodeprep_shm_size='64G'))
    assert plan_check('shm.size', after)['status'] == 'pass'


def test_no_gpu_and_no_size_skips_with_a_report():
    plan = _plan.finish(make(facts(RIGHT_64G)))
    assert plan['reasons'] == [] and plan['drift'] == []
    assert plan['reports'] == ['Skipping shm on gpu-a01: nodeprep_shm_size is not set and there is no GPU memory to '
                               'derive the size from (no GPU).']
    check = plan_check('shm.size', plan)
    assert check['status'] == 'skip'


def test_gpu_memory_unreadable_fails_readiness_and_the_role_skips():
    node = facts(RIGHT_64G)
    node['kernel_state']['pci']['gpu_count'] = 8
    node['nodeprep_errors'] = {'nvidia': 'nvidia-smi timed out after 60 s'}
    plan = _plan.finish(make(node))
    assert plan['reasons'] == []
    assert plan['reports'] == ['Skipping shm on gpu-a01: nodeprep_shm_size is not set and the GPU memory cannot be '
                               'read (nvidia-smi failed: nvidia-smi timed out after 60 s).']
    assert plan_check('shm.size', plan)['status'] == 'fail'


def test_a_full_shm_is_drift_no_run_fixes():
    plan = _plan.finish(make(facts(shm(64 * G, line(64 * G, size_opt='size=64g'), free=10 * 1024 ** 2)),
                             nodeprep_shm_size='64G'))
    assert plan['reasons'] == []
    check = plan_check('shm.size', plan)
    assert check['status'] == 'fail'
    assert check['observed'] == 'live 64.0 GiB, fstab 64.0 GiB; full: only 10.0 MiB free (stale segments of crashed ' \
                                'jobs? see ls -la /dev/shm)'


def test_an_unreadable_fstab_line_fails_readiness():
    node = facts(shm(64 * G, line(64 * G, size_opt='size=64g'),
                     errors=['/etc/fstab line 7: size=lots: not a tmpfs size']))
    plan = _plan.finish(make(node, nodeprep_shm_size='64G'))
    assert plan['reasons'] == []
    assert plan_check('shm.size', plan)['status'] == 'fail'


def test_not_a_tmpfs_is_an_error():
    node = facts(dict(shm(64 * G), fstype='ext4'))
    plan = make(node, nodeprep_shm_size='64G')
    assert plan['errors'] == ['/dev/shm is not a mounted tmpfs (mounted=true, fstype="ext4") on gpu-a01.']
    assert 'fstab' not in plan['args'] and 'live' not in plan['args']


def test_a_size_larger_than_ram_and_swap_is_refused_unless_allowed():
    node = facts(shm(32 * G, ram=64 * G))
    plan = make(node, nodeprep_shm_size='128G')
    assert plan['errors'] == [
        'nodeprep_shm_size="128G" gives a /dev/shm of 137438953472 bytes (128g) on gpu-a01, more than RAM + swap '
        '(68719476736 bytes). Set a smaller nodeprep_shm_size, or nodeprep_shm_allow_oversize=true to allow it anyway.']
    assert make(node, nodeprep_shm_size='128G', nodeprep_shm_allow_oversize=True)['errors'] == []


@pytest.mark.parametrize('value, size', [
    ('64G', 64 * G), ('64GiB', 64 * G), ('64GB', 64 * G), ('1P', 1024 ** 5), ('1.5T', 1536 * G), (4096, 4096),
    ('4096B', 4096), (' 65536m ', 64 * G),
])
def test_size_grammar(value, size):
    plan = make(facts(RIGHT_64G), nodeprep_shm_size=value, nodeprep_shm_allow_oversize=True)
    assert plan['problems'] == []
    assert plan['args']['target'] == -(-size // 4096) * 4096


@pytest.mark.parametrize('value', ['64ib', '0', '0G', 0.5, 'lots', '64 G B', '-1', True])
def test_bad_sizes_are_refused_with_the_value(value):
    plan = make(facts(RIGHT_64G), nodeprep_shm_size=value)
    assert len(plan['problems']) == 1
    assert plan['problems'][0].startswith('nodeprep_shm_size={0}: '.format(_plan.show(value)))
    assert plan['reasons'] == [] and plan['args'] == {}


def test_other_bad_settings():
    plan = make(facts(RIGHT_64G), nodeprep_shm_min_size='lots', nodeprep_shm_gpu_memory_ratio=0.0,
                nodeprep_shm_mount_options=['nosuid,nodev'], nodeprep_shm_path='dev/shm')
    assert plan['problems'] == [
        'nodeprep_shm_min_size="lots": not a size; allowed: bytes, or a number with K, M, G, T or P (base 1024; '
        'KiB/KB forms too)',
        'nodeprep_shm_gpu_memory_ratio=0.0: must be a number greater than 0 (0.5: half of the GPU memory)',
        'nodeprep_shm_mount_options=["nosuid,nodev"]: each item one mount option without commas or spaces (for '
        'example nosuid); size= is written by the role',
        'nodeprep_shm_path="dev/shm": an absolute path such as /dev/shm']


def test_check_mode_before_the_driver_predicts_what_changes_whatever_the_gpu_memory():
    node = facts(shm(12 * G))
    plan = S.plan(node, dict(SETTINGS), _plan.new_context(host='gpu-a01', check_mode=True,
                                                          driver_pending={'persistenced': True}))
    assert plan['args']['predict'] == {'fstab': True, 'live': True, 'exact': True,
                                       'fstab_reasons': ['no /dev/shm line in fstab'],
                                       'live_reasons': ['the live size 12884901888 is below nodeprep_shm_min_size '
                                                        '(68719476736 bytes)']}
    assert plan['reasons'] == ['fstab: no /dev/shm line in fstab',
                               'live: the live size 12884901888 is below nodeprep_shm_min_size (68719476736 bytes)']
    assert plan['checks']['shm.size']['skip'] == 'the GPU memory is read once the driver installed in this run loads'


def test_gather_asks_for_nvidia_only_when_the_size_derives_from_it():
    assert S.gather(dict(SETTINGS))['subsets'] == ['shm', 'nvidia']
    assert S.gather(dict(SETTINGS, nodeprep_shm_size='64G'))['subsets'] == ['shm']
    assert S.gather(dict(SETTINGS, nodeprep_shm_path='/run/shm'))['shm_path'] == '/run/shm'


# ---------------------------------------------------------------------------------------------------------------------
# Agreement with readiness (tests/unit/plugins/module_utils/plans/agreement.py): no fixable drift <=> shm.size passes,
# the plan refuses => it fails, and what no run changes (a full /dev/shm, a line tmpfs would refuse) is named drift.

def planned(node, **given):
    return _plan.plan_with(S, node, dict(SETTINGS, **given), (), _plan.new_context(host='gpu-a01'))


# (name, facts, settings) -> (work, refuses, status of shm.size)
AGREEMENT = [
    ('the wanted size, live and in fstab', facts(RIGHT_64G), {'nodeprep_shm_size': '64G'}, (False, False, 'pass')),
    ('an unlimited /dev/shm with an unlimited fstab line',
     facts(shm(None, line(None, size_opt='size=0', unlimited=True), unlimited=True)), {'nodeprep_shm_size': '64G'},
     (False, False, 'pass')),
    ('an unlimited /dev/shm without an fstab line (the next boot gives half of RAM)', facts(shm(None, unlimited=True)),
     {'nodeprep_shm_size': '64G'}, (True, False, 'fail')),
    ('an unlimited /dev/shm, shrinking asked', facts(shm(None, line(None, size_opt='size=0', unlimited=True),
                                                         unlimited=True)),
     {'nodeprep_shm_size': '64G', 'nodeprep_shm_shrink': True}, (True, False, 'fail')),
    ('larger than wanted, live and in fstab: kept', facts(shm(128 * G, line(128 * G, size_opt='size=128g'))),
     {'nodeprep_shm_size': '64G'}, (False, False, 'pass')),
    ('smaller than wanted', facts(shm(32 * G, line(64 * G, size_opt='size=64g'))), {'nodeprep_shm_size': '64G'},
     (True, False, 'fail')),
    ('smaller than wanted, the live size not managed', facts(shm(32 * G, line(64 * G, size_opt='size=64g'))),
     {'nodeprep_shm_size': '64G', 'nodeprep_shm_remount': False}, (False, False, 'warn')),
    ('full: stale segments of crashed jobs', facts(shm(64 * G, line(64 * G, size_opt='size=64g'), free=10 * 1024 ** 2)),
     {'nodeprep_shm_size': '64G'}, (False, False, 'fail')),
    ('an fstab line tmpfs would refuse', facts(shm(64 * G, line(64 * G, size_opt='size=64g'),
                                                   errors=['/etc/fstab line 7: size=lots: not a tmpfs size'])),
     {'nodeprep_shm_size': '64G'}, (False, False, 'fail')),
    ('not a tmpfs', facts(dict(shm(64 * G), fstype='ext4')), {'nodeprep_shm_size': '64G'}, (False, True, 'fail')),
    ('more than RAM and swap', facts(shm(32 * G, ram=64 * G)), {'nodeprep_shm_size': '128G'}, (True, True, 'fail')),
    ('a size that is not one', facts(RIGHT_64G), {'nodeprep_shm_size': 'lots'}, (False, True, 'fail')),
    ('no size and no GPU: not managed here', facts(RIGHT_64G), {}, (False, False, 'skip')),
    ('the size derives from the GPU memory, which cannot be read',
     dict(facts(RIGHT_64G), kernel_state={'pci': {'gpu_count': 8}},
          nodeprep_errors={'nvidia': 'nvidia-smi timed out after 60 s'}), {}, (False, False, 'fail')),
    ('derived from 8 H100s, /dev/shm at 64 GiB', facts(RIGHT_64G, gpus_mib=[H100_MIB] * 8), {}, (True, False, 'fail')),
    ('the shm facts not gathered', dict(facts(RIGHT_64G), nodeprep_gathered=['nvidia']), {'nodeprep_shm_size': '64G'},
     (False, False, 'fail')),
]


@pytest.mark.parametrize('name, node, given, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_agreement_table(name, node, given, want):
    work, refuses, status = want
    agreement.assert_agrees(name, planned(node, **given), S.CHECKS, work, refuses, {'shm.size': status})


# ---------------------------------------------------------------------------------------------------------------
# The size grammar: what the description of nodeprep_shm_size (SETTINGS, the one text of argument_specs.yml, the
# README and defaults/main.yml) says is a size is read as one, anything else is refused before anything changes.
# Expected bytes written by hand.

# (given, bytes the plan reads)
SIZES = [
    (68719476736, 68719476736),
    ('68719476736', 68719476736),
    (4096.7, 4096),                # a fraction is cut to whole bytes
    ('4096', 4096),
    ('4096B', 4096),
    ('4096b', 4096),
    ('512G', 549755813888),
    ('512g', 549755813888),
    ('512GB', 549755813888),
    ('512GiB', 549755813888),
    ('512gib', 549755813888),
    ('1.5T', 1649267441664),       # 1536 GiB
    ('64 G', 68719476736),
    (' 64G ', 68719476736),
    ('64K', 65536),
    ('64KiB', 65536),
    ('64kb', 65536),
    ('0.5K', 512),
    ('65536M', 68719476736),
    ('1P', 1125899906842624),
    ('2t', 2199023255552),
]
REFUSED = ['-1G', '64X', '64ib', '1e9', '0x40G', '64GG', '.5G', '5.G', '64 gigs', 'huge', '1E', '0', '0.1', 0, -5,
           0.5, True, False, [64], {'size': 64}]


def read_size(value):
    plan = _plan.new_plan('shm')
    explicit, _floor = S.check_settings(plan, dict(SETTINGS, nodeprep_shm_size=value))
    return explicit, plan['problems']


@pytest.mark.parametrize('given, size', SIZES)
def test_each_size_form_the_description_names_is_read(given, size):
    assert read_size(given) == (size, [])
    # The floor takes the same forms (its type is str: an int given arrives as its digits).
    plan = _plan.new_plan('shm')
    assert S.check_settings(plan, dict(SETTINGS, nodeprep_shm_min_size=str(given)))[1] == size
    assert plan['problems'] == []


@pytest.mark.parametrize('given', REFUSED, ids=[repr(v) for v in REFUSED])
def test_any_other_size_is_refused(given):
    explicit, problems = read_size(given)
    assert explicit is None
    assert len(problems) == 1 and problems[0].startswith('nodeprep_shm_size={0}: '.format(_plan.show(given)))


@pytest.mark.parametrize('given', [None, ''])
def test_null_or_empty_derives_the_size(given):
    assert read_size(given) == (None, [])


def test_a_size_is_rounded_up_to_a_page():
    node = facts(shm(64 * G, line(64 * G, size_opt='size=64g')))
    assert make(node, nodeprep_shm_size='0.5K')['args']['target'] == 4096
    assert make(node, nodeprep_shm_size=4097)['args']['target'] == 8192


def description_examples():
    """(text, accepted) of every V(...) in the description: before "Anything else" accepted (or null/''), after it
    refused."""
    text = ' '.join(S.SETTINGS['nodeprep_shm_size']['description'])
    accepted, refused = text.split('Anything else', 1)
    return [(v, True) for v in re.findall(r'V\(([^)]*)\)', accepted)] + \
        [(v, False) for v in re.findall(r'V\(([^)]*)\)', refused)]


def test_the_description_names_only_what_the_plan_reads():
    examples = description_examples()
    assert len(examples) >= 14
    for text, accepted in examples:
        # As an inventory or vars file gives it (YAML), and as -e gives it (text).
        for given in (yaml.safe_load(text), text):
            explicit, problems = read_size(given)
            if given in (None, '', "''", 'null'):
                continue
            assert (problems == []) is accepted, (text, given, problems)
            if accepted:
                assert explicit in [size for _given, size in SIZES], (text, explicit)
