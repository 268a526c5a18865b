# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/plans/_plan_imex.py: facts + settings + the domain group's members -> the imex role's plan,
its agreement with the readiness check imex.domain (it passes exactly when the plan has no drift), and idempotence
(apply what the plan says, plan again: nothing to do)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import hashlib
import json
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import parse_domain_json
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_imex as X
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
NODES = '/etc/nvidia-imex/nodes_config.cfg'
# Three compute trays; their addresses sort differently as text (10.0.7.12 < 10.0.7.21 < 10.0.7.3) and as addresses.
HOSTS = [('tray-c', '10.0.7.21'), ('tray-a', '10.0.7.3'), ('tray-b', '10.0.7.12')]
ORDER = ['10.0.7.3', '10.0.7.12', '10.0.7.21']
LIST = '10.0.7.3\n10.0.7.12\n10.0.7.21\n'
ME = 'tray-a'
CLIQUE = {'state': 'Completed', 'status': 'Success', 'cluster_uuid': '00000001-0000-0000-0000-000000000001',
          'clique_id': '2'}
MISSING = {'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None, 'size': None, 'sha1': None,
           'target': None}


def state(text, mode='0644'):
    raw = text.encode('utf-8')
    return {'exists': True, 'type': 'file', 'mode': mode, 'uid': 0, 'gid': 0, 'size': len(raw),
            'sha1': hashlib.sha1(raw).hexdigest(), 'target': None}  # nosec B324 - what gpu_node_facts reports


def link(target):
    return {'exists': True, 'type': 'link', 'mode': '0777', 'uid': 0, 'gid': 0, 'size': len(target), 'sha1': None,
            'target': target}


def members(hosts=None, group='rack7', fabric=None):
    hosts = HOSTS if hosts is None else hosts
    return {'group': group, 'found': True,
            'hosts': [{'host': h, 'values': {'inventory_hostname': h, 'ansible_host': ip}, 'error': None,
                       'fabric': (fabric or {}).get(h)} for h, ip in hosts]}


def ctl_domain(status='UP', states=None, links=None, hosts=None):
    hosts = ORDER if hosts is None else hosts
    states = states or ['READY'] * len(hosts)
    links = links or {}
    nodes = dict((str(i), {'status': states[i], 'host': host, 'version': '580.95', 'hostName': '',
                           'connections': dict((str(j), {'host': other, 'status': links.get((i, j), 'CONNECTED')})
                                               for j, other in enumerate(hosts))})
                 for i, host in enumerate(hosts))
    return parse_domain_json(json.dumps({'nodes': nodes, 'status': status, 'timestamp': '1/1/2026 00:00:00.000'}))


def imex(nodes_text=LIST, domain='up', major=234, channel=True, config=None):
    out = {'config_path': '/etc/nvidia-imex/config.cfg',
           'config': config if config is not None else {'IMEX_NODE_CONFIG_FILE': NODES, 'IMEX_CMD_ENABLED': '1',
                                                        'IMEX_CMD_PORT': '50005', 'SERVER_PORT': '50000'},
           'config_error': None, 'nodes_path': NODES,
           'nodes_file': state(nodes_text) if nodes_text is not None else dict(MISSING),
           'nodes': None if nodes_text is None else [line for line in nodes_text.splitlines() if line],
           'nodes_error': None,
           'channels': {'major': major, 'error': None, 'dir': {'exists': channel, 'type': 'directory'},
                        'nodes': {'0': {'exists': True, 'type': 'char', 'major': 234, 'minor': 0, 'mode': '0666',
                                        'uid': 0, 'gid': 0} if channel else {'exists': False}}},
           'ctl': {'path': '/usr/bin/nvidia-imex-ctl', 'ran': True, 'rc': 0, 'timed_out': False, 'error': None,
                   'not_configured': False, 'output': '', 'domain': ctl_domain() if domain == 'up' else domain}}
    if domain is None:
        out['ctl'].update(rc=1, domain=None, not_configured=True,
                          error='nvidia-imex-ctl -N -j (rc=1): Failed to read node configuration file ' + NODES)
    return out


def boot_files(script):
    unit = X.unit_text('/usr/bin/python3')
    return {X.SCRIPT: state(script), X.UNIT_PATH: state(unit), X.UNIT_LINK: link(X.UNIT_PATH),
            X.PLATFORM_PYTHON: dict(MISSING)}


def script():
    with open(os.path.join(ROOT, 'roles', 'imex', 'files', 'nodeprep-imex-channels')) as handle:
        return handle.read()


def converged(**kw):
    return {'nodeprep_gathered': ['imex', 'nvidia', 'units', 'files'],
            'imex': imex(**kw), 'nvidia': {'present': True, 'gpus': [{'pci_bus_id': '00000009:01:00.0',
                                                                      'fabric': dict(CLIQUE)}]},
            'nodeprep_units': {'nvidia-imex.service': {'load': 'loaded', 'active': 'active', 'sub': 'running',
                                                       'enabled': 'enabled'},
                               X.CHANNEL_UNIT: {'load': 'loaded', 'active': 'active', 'sub': 'exited',
                                                'enabled': 'enabled'}},
            'nodeprep_files': boot_files(script())}


def fresh():
    """nvidia_driver installed nvidia-imex and started it (nodeprep_nvidia_driver_imex): no node list, no channel."""
    facts = converged(nodes_text=None, domain=None, channel=False)
    facts['nodeprep_files'] = dict((path, dict(MISSING)) for path in (X.SCRIPT, X.UNIT_PATH, X.UNIT_LINK,
                                                                      X.PLATFORM_PYTHON))
    facts['nodeprep_units'][X.CHANNEL_UNIT] = {'load': 'not-found', 'active': 'inactive', 'sub': 'dead',
                                               'enabled': None}
    return facts


SETTINGS = {'nodeprep_imex_domain_group': 'rack7'}


def make_plan(facts, given=None, context=None, group_members=None, host=ME):
    settings, problems = _plans.typed_settings('imex', dict(SETTINGS, **(given or {})))
    ctx = _plan.new_context(host=host, extra=context)
    ctx['imex_members'] = members() if group_members is None else group_members
    return _plans.plan_role('imex', facts, settings, problems, ctx)


def readiness(plan):
    result = _readiness.plan_check('imex.domain', plan)
    return result['status'], result['observed']


def apply(facts, plan):
    """What the role's tasks do with ``plan``: its files, the node list, the channel, the service."""
    facts = copy.deepcopy(facts)
    for entry in plan['files']:
        if entry['change'] is None:
            continue
        if entry['path'] == plan['args']['nodes']['path']:
            facts['imex']['nodes_file'] = state(entry['content'])
            facts['imex']['nodes'] = entry['content'].split()
        elif entry['state'] == 'file':
            facts['nodeprep_files'][entry['path']] = state(entry['content'], entry['mode'])
        elif entry['state'] == 'link':
            facts['nodeprep_files'][entry['path']] = link(entry['src'])
        elif entry['state'] == 'absent':
            facts['nodeprep_files'][entry['path']] = dict(MISSING)
    if plan['args'].get('channels_now'):
        facts['imex']['channels'] = imex()['channels']
    service = plan['args']['service']
    if service['state'] or service['enabled']:
        facts['nodeprep_units']['nvidia-imex.service'] = {'load': 'loaded', 'active': 'active', 'sub': 'running',
                                                          'enabled': 'enabled'}
        facts['imex']['ctl'] = imex()['ctl']
    return facts


DOWN = ctl_domain('DEGRADED', ['READY', 'UNAVAILABLE', 'READY'],
                  {(0, 1): 'RECOVERING', (2, 1): 'RECOVERING', (1, 0): 'INVALID', (1, 1): 'INVALID', (1, 2): 'INVALID'})
PEER_DOWN = ['peer tray-b (10.0.7.12) is UNAVAILABLE (it does not answer: nvidia-imex stopped, or the node is down or '
             'unreachable)',
             'tray-a (10.0.7.3) -> tray-b (10.0.7.12): RECOVERING (connection lost, not cleaned up yet)',
             'IMEX domain DEGRADED']


def test_not_configured_does_nothing_and_the_check_skips():
    plan = make_plan(converged(), {'nodeprep_imex_domain_group': None}, group_members=None)
    assert (plan['run'], plan['reasons'], plan['files'], plan['errors']) == ([], [], [], [])
    assert readiness(plan) == ('skip', "nodeprep_imex_domain_group is not set (this node's GPUs are in NVLink clique "
                                       '00000001-0000-0000-0000-000000000001.2: multi-node NVLink needs IMEX)')
    assert X.gather(_plan.defaults(X)) == _plan.new_gather()


def test_a_converged_node_has_nothing_to_do_and_passes():
    plan = make_plan(converged())
    assert (plan['run'], plan['reasons'], plan['errors'], plan['drift']) == ([], [], [], [])
    assert readiness(plan) == ('pass', 'UP: 3/3 nodes READY, all connected; channel0 present')
    assert plan['checks']['imex.domain']['expected'] == (
        'nvidia-imex running with the 3 nodes of group rack7 in address order (tray-a 10.0.7.3, tray-b 10.0.7.12, '
        'tray-c 10.0.7.21), the domain UP with every peer READY and CONNECTED; channel0 at every boot')
    assert plan['args']['service'] == {'name': 'nvidia-imex.service', 'enabled': None, 'state': None,
                                       'reset_failed': False, 'installed': True}
    assert plan['args']['nodes'] == {'path': NODES, 'addresses': ORDER}


def test_a_fresh_node_gets_the_list_the_channel_unit_and_a_restart():
    plan = make_plan(fresh())
    assert plan['errors'] == [] and plan['problems'] == []
    files = dict((entry['path'], entry) for entry in plan['files'])
    assert files[NODES]['content'] == LIST and files[NODES]['mode'] == '0644'
    assert files[X.UNIT_PATH]['content'] == X.unit_text('/usr/bin/python3')
    assert files[X.SCRIPT]['content'] == script()
    assert files[X.UNIT_LINK]['src'] == X.UNIT_PATH
    assert plan['args']['service'] == {'name': 'nvidia-imex.service', 'enabled': None, 'state': 'restarted',
                                       'reset_failed': False, 'installed': True}
    assert plan['args']['channels_now'] is True and plan['args']['daemon_reload'] is True
    status, observed = readiness(plan)
    assert status == 'fail'
    assert observed.split('; ') == [
        'domain read after nvidia-imex restarts', '/etc/nvidia-imex/nodes_config.cfg: missing (wanted: 10.0.7.3, 10.0.7.12, 10.0.7.21)',
        '/usr/local/sbin/nodeprep-imex-channels: missing (the channel is not made again at the next boot)',
        '/etc/systemd/system/nodeprep-imex-channels.service: missing (the channel is not made again at the next boot)',
        '/etc/systemd/system/multi-user.target.wants/nodeprep-imex-channels.service: missing (the channel is not made '
        'again at the next boot)', '/dev/nvidia-caps-imex-channels/channel0 does not exist (char 234:0 wanted)']
    again = make_plan(apply(fresh(), plan))
    assert (again['reasons'], again['drift']) == ([], [])
    assert readiness(again) == ('pass', 'UP: 3/3 nodes READY, all connected; channel0 present')


def test_the_same_list_on_every_member_whatever_the_inventory_order():
    texts = set()
    for host, _address in HOSTS:
        plan = make_plan(fresh(), host=host, group_members=members(list(reversed(HOSTS)) if host == 'tray-b'
                                                                   else HOSTS))
        texts.add([e for e in plan['files'] if e['path'] == NODES][0]['content'])
    assert texts == {LIST}


def test_a_peer_down_is_named_and_is_no_work():
    facts = converged()
    facts['imex']['ctl']['domain'] = DOWN
    plan = make_plan(facts)
    assert plan['reasons'] == [] and plan['run'] == []
    words = ['DEGRADED: 2/3 nodes READY, 2 connections not CONNECTED', 'channel0 present'] + PEER_DOWN
    assert readiness(plan) == ('fail', '; '.join(words))


def test_an_old_list_is_rewritten_and_the_daemon_restarted():
    plan = make_plan(converged(nodes_text='10.0.7.3\n10.0.7.12\n'))
    assert plan['reasons'] == ['/etc/nvidia-imex/nodes_config.cfg: content differs (wanted: 10.0.7.3, 10.0.7.12, '
                               '10.0.7.21)']
    assert plan['args']['service']['state'] == 'restarted'
    assert 'channels_now' not in plan['args']


def test_without_restart_the_list_is_written_and_the_restart_reported():
    plan = make_plan(converged(nodes_text='10.0.7.3\n'), {'nodeprep_imex_restart': 'false'})
    assert plan['args']['service']['state'] is None
    assert _plan.drift_for(plan, 'imex.domain', 'warn') == [
        'nvidia-imex still runs with its old node list: restart it (nodeprep_imex_restart is false)']
    assert readiness(plan)[0] == 'fail'


def test_a_unit_that_hit_the_start_limit_is_reset_and_started():
    facts = converged()
    facts['nodeprep_units']['nvidia-imex.service'].update(active='failed', sub='failed')
    plan = make_plan(facts)
    assert plan['args']['service'] == {'name': 'nvidia-imex.service', 'enabled': None, 'state': 'started',
                                       'reset_failed': True, 'installed': True}
    assert plan['reasons'] == ['nvidia-imex.service is failed']


def test_a_disabled_service_is_enabled():
    facts = converged()
    facts['nodeprep_units']['nvidia-imex.service']['enabled'] = 'disabled'
    plan = make_plan(facts)
    assert plan['args']['service']['enabled'] is True and plan['args']['service']['state'] is None
    assert plan['reasons'] == ['nvidia-imex.service is disabled, not enabled at boot']


def test_a_channel_with_the_major_of_an_earlier_driver_is_made_again():
    plan = make_plan(converged(major=236))
    assert plan['args']['channels_now'] is True
    assert plan['reasons'] == ['/dev/nvidia-caps-imex-channels/channel0 is char 234:0, the driver registered 236:0']


def test_slurm_channels_remove_the_boot_unit_and_leave_dev_alone():
    plan = make_plan(converged(channel=False), {'nodeprep_imex_channels': 'slurm'})
    assert [(e['path'], e['state']) for e in plan['files'] if e['change']] == [
        (X.UNIT_LINK, 'absent'), (X.UNIT_PATH, 'absent'), (X.SCRIPT, 'absent')]
    assert 'channels_now' not in plan['args']
    again = make_plan(apply(converged(channel=False), plan), {'nodeprep_imex_channels': 'slurm'})
    assert (again['reasons'], again['drift']) == ([], [])
    assert readiness(again) == ('pass', 'UP: 3/3 nodes READY, all connected')
    assert again['checks']['imex.domain']['expected'].endswith('channels per job (Slurm switch/nvidia_imex)')


def test_a_member_in_another_clique_fails_the_check():
    other = dict(CLIQUE, clique_id='5')
    plan = make_plan(converged(), group_members=members(fabric={'tray-c': [{'pci_bus_id': 'x', 'fabric': other}]}))
    assert plan['reasons'] == []
    assert readiness(plan) == ('fail', 'UP: 3/3 nodes READY, all connected; channel0 present; tray-c is in NVLink '
                                       'clique 00000001-0000-0000-0000-000000000001.5, tray-a in '
                                       '00000001-0000-0000-0000-000000000001.2: they cannot share memory over '
                                       'NVLink, so they are not one IMEX domain (fix the inventory group)')


def test_the_ctl_timing_out_fails_the_check():
    facts = converged()
    facts['imex']['ctl'].update(domain=None, timed_out=True, rc=124,
                                error='nvidia-imex-ctl -N -j did not answer within 30 s')
    plan = make_plan(facts)
    assert plan['reasons'] == []
    assert readiness(plan) == ('fail', 'domain not read; channel0 present; nvidia-imex-ctl -N -j did not answer '
                                       'within 30 s')


def test_a_command_service_switched_off_is_said():
    config = {'IMEX_NODE_CONFIG_FILE': NODES, 'IMEX_CMD_ENABLED': '0'}
    plan = make_plan(converged(config=config))
    assert plan['reasons'] == []
    assert _plan.drift_for(plan, 'imex.domain') == [
        '/etc/nvidia-imex/config.cfg: IMEX_CMD_ENABLED=0: nvidia-imex-ctl -N cannot read the domain (set '
        'IMEX_CMD_ENABLED=1 with IMEX_CMD_PORT in the config)']


def test_a_node_list_named_elsewhere_by_the_config():
    facts = converged(config={'IMEX_NODE_CONFIG_FILE': '/srv/imex/nodes.cfg', 'IMEX_CMD_ENABLED': '1'})
    facts['imex']['nodes_path'] = '/srv/imex/nodes.cfg'
    facts['imex']['nodes_file'] = dict(MISSING)
    plan = make_plan(facts)
    assert [e['path'] for e in plan['files'] if e['change']] == ['/srv/imex/nodes.cfg']
    assert plan['args']['nodes']['path'] == '/srv/imex/nodes.cfg'


@pytest.mark.parametrize('facts, words', [
    (dict(converged(), nodeprep_units={'nvidia-imex.service': {'load': 'not-found', 'active': 'inactive'},
                                       X.CHANNEL_UNIT: {'load': 'not-found', 'active': 'inactive'}}),
     'nvidia-imex is not installed on tray-a (nvidia-imex.service is not-found): set nodeprep_nvidia_driver_imex: '
     "true (role nvidia_driver installs it at the driver's version)"),
    (dict(converged(), imex=dict(imex(), config=None)),
     '/etc/nvidia-imex/config.cfg does not exist: the nvidia-imex package ships it (reinstall it, or set '
     'nodeprep_imex_config to the config nvidia-imex.service starts with)'),
    (dict(converged(), imex=dict(imex(), config=None, config_error='line 3: \'x\' is not KEY=value')),
     "cannot read the IMEX config /etc/nvidia-imex/config.cfg: line 3: 'x' is not KEY=value"),
])
def test_what_the_role_fails_on(facts, words):
    plan = make_plan(facts)
    assert plan['errors'] == [words]
    assert _plans.refusal('imex', plan, 'tray-a') == 'imex on tray-a: ' + words
    assert readiness(plan)[0] == 'fail'


@pytest.mark.parametrize('group_members, words', [
    (members(hosts=HOSTS[1:2] + [('tray-b', 'tray-b.example')]),
     "IMEX domain 'rack7': ansible_host of tray-b is 'tray-b.example', not an IPv4 or IPv6 address "
     '(nodes_config.cfg holds addresses; set nodeprep_imex_address for that host)'),
    (members(hosts=HOSTS[:1]), "nodeprep_imex_domain_group='rack7': tray-a is not in that group (its members: "
                               'tray-c)'),
    (members(group='rack9'), "the members of the IMEX domain group 'rack7' were not handed to the plan (the "
                             'gpufleet.nodeprep.node_plan and readiness_info actions read them from the inventory)'),
])
def test_domains_the_role_refuses(group_members, words):
    plan = make_plan(converged(), group_members=group_members)
    assert plan['errors'] == [words] and plan['files'] == []
    assert readiness(plan) == ('fail', words)


@pytest.mark.parametrize('given, problem', [
    ({'nodeprep_imex_address': 'tray-a.example'},
     'nodeprep_imex_address="tray-a.example": an IPv4 or IPv6 address (not a host name), or null for ansible_host'),
    ({'nodeprep_imex_ctl_timeout': 0}, 'nodeprep_imex_ctl_timeout=0: a whole number of seconds, at least 1'),
    ({'nodeprep_imex_domain_group': ' '},
     'nodeprep_imex_domain_group=" ": the name of an inventory group, or null to leave IMEX alone'),
    # A path setting: the typing's words (plugin_utils/_plans.py).
    ({'nodeprep_imex_config': 'imex.cfg'},
     'nodeprep_imex_config="imex.cfg": not an absolute path; allowed: an absolute path on the node as written (no ~ or '
     '$VARIABLE: the controller would expand them; no newline or other control character, no space at either end, no '
     'empty, . or .. part, no / at the end) (role imex: docs/roles/imex.md)'),
])
def test_settings_the_role_refuses(given, problem):
    plan = make_plan(converged(), given)
    assert plan['problems'] == [problem]
    assert plan['files'] == [] and plan['reasons'] == []


def test_a_channels_value_that_is_not_a_choice_is_refused_by_the_contract():
    plan = make_plan(converged(), {'nodeprep_imex_channels': 'dynamic'})
    assert plan['problems'][0].startswith('nodeprep_imex_channels="dynamic": value of nodeprep_imex_channels must '
                                          'be one of: static, slurm, got: dynamic')


def test_check_mode_predicts_from_the_driver_being_installed_in_this_run():
    facts = fresh()
    facts['imex'] = dict(imex(nodes_text=None, domain=None, channel=False), config=None, nodes_path=NODES)
    facts['nodeprep_units']['nvidia-imex.service'] = {'load': 'not-found', 'active': 'inactive', 'sub': 'dead',
                                                      'enabled': None}
    plan = make_plan(facts, context={}, host=ME)
    assert plan['errors'] == ['nvidia-imex is not installed on tray-a (nvidia-imex.service is not-found): set '
                              "nodeprep_nvidia_driver_imex: true (role nvidia_driver installs it at the driver's "
                              'version)']
    settings, problems = _plans.typed_settings('imex', SETTINGS)
    ctx = _plan.new_context(host=ME, check_mode=True, driver_pending={'persistenced': True, 'imex': True})
    ctx['imex_members'] = members()
    plan = _plans.plan_role('imex', facts, settings, problems, ctx)
    assert plan['errors'] == []
    assert plan['args']['service'] == {'name': 'nvidia-imex.service', 'enabled': True, 'state': 'restarted',
                                       'reset_failed': False, 'installed': False}
    assert plan['args']['channels_now'] is True
    assert [e['path'] for e in plan['files'] if e['change']] == [NODES, X.SCRIPT, X.UNIT_PATH, X.UNIT_LINK]


def _down():
    facts = converged()
    facts['imex']['ctl']['domain'] = DOWN
    return facts


def _timed_out():
    facts = converged()
    facts['imex']['ctl'].update(domain=None, timed_out=True, rc=124,
                                error='nvidia-imex-ctl -N -j did not answer within 30 s')
    return facts


def _unit_failed():
    facts = converged()
    facts['nodeprep_units']['nvidia-imex.service'].update(active='failed', sub='failed')
    return facts


def _not_installed():
    facts = converged()
    facts['nodeprep_units']['nvidia-imex.service'] = {'load': 'not-found', 'active': 'inactive', 'sub': 'dead',
                                                      'enabled': None}
    return facts


OTHER_CLIQUE = members(fabric={'tray-c': [{'pci_bus_id': 'x', 'fabric': dict(CLIQUE, clique_id='5')}]})

# (name, facts, settings, the group's members (None: members()), (work, refuses, imex.domain)), written by hand.
AGREEMENT = [
    ('converged', converged(), {}, None, (False, False, 'pass')),
    ('not in a domain (the role is opt-in)', converged(), {'nodeprep_imex_domain_group': None}, None,
     (False, False, 'skip')),
    ('fresh: no list, no channel, no boot unit', fresh(), {}, None, (True, False, 'fail')),
    ('an old node list', converged(nodes_text='10.0.7.3\n'), {}, None, (True, False, 'fail')),
    ('an old node list, restart off: the daemon keeps the old one', converged(nodes_text='10.0.7.3\n'),
     {'nodeprep_imex_restart': 'false'}, None, (True, False, 'fail')),
    ('the driver has not registered the channel device', converged(major=None), {}, None, (True, False, 'fail')),
    ('a channel of an earlier driver\'s major', converged(major=236), {}, None, (True, False, 'fail')),
    ('the daemon hit its start limit', _unit_failed(), {}, None, (True, False, 'fail')),
    ('a peer down: no run of the role mends it', _down(), {}, None, (False, False, 'fail')),
    ('the ctl timed out', _timed_out(), {}, None, (False, False, 'fail')),
    ('a member in another NVLink clique', converged(), {}, OTHER_CLIQUE, (False, False, 'fail')),
    ('nvidia-imex not installed', _not_installed(), {}, None, (False, True, 'fail')),
    ('a ctl timeout of 0', converged(), {'nodeprep_imex_ctl_timeout': 0}, None, (False, True, 'fail')),
    ('the group not in the inventory', converged(), {}, members(group='rack9'), (False, True, 'fail')),
]


@pytest.mark.parametrize('name, facts, given, group_members, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_agreement_table(name, facts, given, group_members, want):
    work, refuses, status = want
    plan = make_plan(copy.deepcopy(facts), given, group_members=group_members)
    agreement.assert_agrees(name, plan, X.CHECKS, work, refuses, {'imex.domain': status})
