# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nic_offload role's plan (plugins/module_utils/plans/_plan_nic_offload.py): a table of facts + settings -> plan,
its agreement with the readiness check nic.offload, and idempotence (apply the plan to a fake node, plan again).

The settings are typed as the node_plan action types them (plugin_utils/_plans.typed_settings, which imports only
ansible.module_utils), so the table holds values the way users write them ("false", "eth0,eth1").
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import hashlib
import re

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ethtool_fixture

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nic_offload as M
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import parse_features
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nic_offload import plan_feature_changes
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nic_offload import features_as_parsed
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement

HOST = 'gpu-a01'
NET = '10.20.0.0/16'
MLX_IF = 'enp1s0f0np0'
MLX = parse_features(ethtool_fixture('mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt'))

UNIT = '/etc/systemd/system/nodeprep-nic-offload@.service'
ENV_DIR = '/etc/nodeprep/nic-offload'
MANAGED = '# Managed by gpufleet.nodeprep (nic_offload); local changes are overwritten.\n'
# The boot unit, written by hand from the former template (roles/nic_offload/templates, with the header line of
# _plan.managed_line instead of ansible_managed).
UNIT_TEXT = (MANAGED +
             '# gpufleet.nodeprep.nic_offload: ethtool -K settings are lost at reboot; this re-applies\n'
             '# /etc/nodeprep/nic-offload/<interface>.env when the interface appears.\n'
             '[Unit]\n'
             'Description=Apply NIC offload features to %I (gpufleet.nodeprep)\n'
             'BindsTo=sys-subsystem-net-devices-%i.device\n'
             'After=sys-subsystem-net-devices-%i.device\n'
             'ConditionPathExists=/etc/nodeprep/nic-offload/%I.env\n'
             '\n'
             '[Service]\n'
             'Type=oneshot\n'
             'RemainAfterExit=yes\n'
             'EnvironmentFile=/etc/nodeprep/nic-offload/%I.env\n'
             'ExecStart=/usr/sbin/ethtool -K %I $NODEPREP_ETHTOOL_FEATURES\n'
             '\n'
             '[Install]\n'
             'WantedBy=sys-subsystem-net-devices-%i.device\n')
GRO_LRO_OFF = MANAGED + 'NODEPREP_ETHTOOL_FEATURES=gro off lro off\n'


def sha1(text):
    return hashlib.sha1(text.encode('utf-8')).hexdigest()  # nosec B324 - what gpu_node_facts reports


def wants(ifname):
    escaped = ifname.replace('-', '\\x2d')
    folder = '/etc/systemd/system/sys-subsystem-net-devices-{0}.device.wants'.format(escaped)
    return folder, '{0}/nodeprep-nic-offload@{1}.service'.format(folder, escaped)


def nic(address='10.20.0.11/16', driver='mlx5_core', gro=False, lro=False, lro_fixed=False, nm=None, conn=None):
    """A NIC as gpu_node_facts reports it (its features reduced to three); ``conn`` its NetworkManager connection as
    the gather read it (nm_connection: name and the properties asked for)."""
    out = {'mtu': 9000, 'speed_mbps': 400000, 'addresses': {'ipv4': [address], 'ipv6': []},
           'driver': {'driver': driver, 'version': '6.8', 'firmware_version': '28.43.1014', 'bus_info': ''},
           'features': {'generic-receive-offload': {'enabled': gro, 'fixed': False},
                        'large-receive-offload': {'enabled': lro, 'fixed': lro_fixed},
                        'tcp-segmentation-offload': {'enabled': True, 'fixed': False}},
           'nm_managed': nm}
    if conn is not None:
        out['nm_connection'] = conn
    return out


def connection(name='System eth0', gro='off', lro='off', error=None):
    """A NIC's NetworkManager connection as the gather reads it (nmcli -g ... connection show)."""
    if error:
        return {'name': None, 'properties': {}, 'error': error}
    if name is None:
        return {'name': None, 'properties': {}, 'error': None}
    return {'name': name, 'properties': {'ethtool.feature-gro': gro, 'ethtool.feature-lro': lro}, 'error': None}


def file_state(kind, content=None, mode='0644', target=None):
    return {'exists': True, 'type': kind, 'mode': mode, 'uid': 0, 'gid': 0, 'size': None,
            'sha1': sha1(content) if content is not None else None, 'target': target}


def persisted(*ifnames):
    """nodeprep_files of a node where the boot unit persists gro and lro off on ``ifnames``."""
    files = {UNIT: file_state('file', UNIT_TEXT), ENV_DIR: file_state('directory', mode='0755')}
    for ifname in ifnames:
        files['{0}/{1}.env'.format(ENV_DIR, ifname)] = file_state('file', GRO_LRO_OFF)
        folder, link = wants(ifname)
        files[folder] = file_state('directory', mode='0755')
        files[link] = file_state('link', mode='0777', target=UNIT)
    return files


def node(nics=None, files=None):
    """ansible_facts after the one gather of a node whose eth0 is on the training network."""
    return {'nodeprep_gathered': ['nic', 'files'],
            'nics': {'eth0': nic()} if nics is None else nics,
            'nodeprep_files': persisted('eth0') if files is None else files,
            'nodeprep_file_patterns': list(M.FILE_PATTERNS)}


# The boot unit's own paths gathered, none there (the per-interface ones are globs: not reported, so absent).
ABSENT = {UNIT: {'exists': False}, ENV_DIR: {'exists': False}}

BASE = {'nodeprep_nic_offload_features': {'gro': False, 'lro': False}, 'nodeprep_nic_offload_networks': [NET]}


def make_plan(facts, given=None, base=None):
    provided = dict(BASE if base is None else base)
    provided.update(given or {})
    settings, problems = _plans.typed_settings('nic_offload', provided)
    return _plans.plan_role('nic_offload', facts, settings, problems, _plan.new_context(host=HOST))


def changes(plan):
    return [entry['change'] for entry in plan['files'] if entry['change']]


def drift(plan):
    return [(d['msg'], d['level'], d['fixable']) for d in plan['drift']]


UNIT_MISSING = ['{0}: missing'.format(p) for p in (UNIT, ENV_DIR, ENV_DIR + '/eth0.env') + wants('eth0')]
MLX_TODO = [MLX_IF + ': generic-receive-offload is on'] + ['{0}: missing'.format(p) for p in (
    UNIT, ENV_DIR, ENV_DIR + '/' + MLX_IF + '.env') + wants(MLX_IF)]
NM_GRO_ON = 'eth0: NetworkManager connection System eth0: ethtool.feature-gro is on, wanted off'
NM_UNSET = ['eth0: NetworkManager connection System eth0: ethtool.feature-{0} is not set, wanted off'.format(f)
            for f in ('gro', 'lro')]
NM_DOWN = 'nmcli -g GENERAL.CONNECTION device show eth0 (rc=8): Error: NetworkManager is not running.'
NO_MATCH = 'no NIC matches (interfaces -, drivers -, networks 10.99.0.0/16)'
NO_MATCH_SETTINGS = 'nodeprep_nic_offload_interfaces=[], _drivers=[], _networks=["10.99.0.0/16"]'
FIXED = 'interface eth0: fixed by the driver, cannot change: large-receive-offload [lro] (is on, asked off); set ' \
        'ignore_fixed to skip them'
KNOWN = ('the features this device has are: generic-receive-offload, large-receive-offload, tcp-segmentation-offload; '
         'ethtool -K also takes the short names: tso, gro, lro')

# (id, facts, settings as users write them, expected: the plan's problems, errors, reasons, reports, drift
# (msg, level, fixable), nic_offload module arguments, NetworkManager NICs, and the readiness check's result)
CASES = [
    # tests/unit/roles/site_reasons.yml: "memlock, shm, nccl and nic_offload already right (or asked for nothing)"
    ('no features: nothing to do, nothing gathered', {}, {'nodeprep_nic_offload_features': {}},
     dict(check=('skip', 'no NIC offload setting managed'))),
    ('converged: the features and the boot unit as wanted', node(), {},
     dict(check=('pass', 'as wanted on eth0'))),
    # site_reasons.yml: "offload features with no NIC matching run the role (it reports or refuses)"
    ('no NIC on the network: reported, nothing to do', node(files=ABSENT), {'nodeprep_nic_offload_networks': ['10.99.0.0/16']},
     dict(reports=['No interface on gpu-a01 matches {0}; present: ["eth0"]. Nothing to do here.'.format(
         NO_MATCH_SETTINGS)], check=('skip', NO_MATCH))),
    ('no NIC on the network with require_match: refused', node(files=ABSENT),
     {'nodeprep_nic_offload_networks': ['10.99.0.0/16'], 'nodeprep_nic_offload_require_match': 'yes'},
     dict(errors=['nodeprep_nic_offload_require_match is true and no interface on gpu-a01 matches {0}; present: '
                  '["eth0"]'.format(NO_MATCH_SETTINGS)],
          drift=[(NO_MATCH, 'fail', False)], check=('fail', NO_MATCH))),
    # site_reasons.yml: "a feature value that is not a boolean runs the role (which refuses it)"
    ('a feature value that is not a boolean', node(), {'nodeprep_nic_offload_features': {'gro': 'maybe'}},
     dict(problems=['nodeprep_nic_offload_features={"gro": "maybe"}: ' + M.FEATURES_ALLOWED +
                    '; not true or false: gro'], check=('fail', None))),
    ('a feature value 0.5', node(), {'nodeprep_nic_offload_features': {'gro': 0.5}},
     dict(problems=['nodeprep_nic_offload_features={"gro": 0.5}: ' + M.FEATURES_ALLOWED + '; not true or false: gro'],
          check=('fail', None))),
    ('feature values written as text are read as Ansible reads them', node(),
     {'nodeprep_nic_offload_features': {'gro': 'off', 'lro': 'no'}}, dict(check=('pass', 'as wanted on eth0'))),
    ('a feature name that cannot be one', node(), {'nodeprep_nic_offload_features': {'rdma offload': False}},
     dict(problems=['nodeprep_nic_offload_features={"rdma offload": false}: ' + M.FEATURES_ALLOWED +
                    '; not a feature name: "rdma offload"'], check=('fail', None))),
    ('features given as a list', node(), {'nodeprep_nic_offload_features': ['gro']},
     dict(problems=['nodeprep_nic_offload_features=["gro"]: argument \'nodeprep_nic_offload_features\' is of type '
                    'list and we were unable to convert to dict: <class \'list\'> cannot be converted to a dict '
                    '(role nic_offload: docs/roles/nic_offload.md)'], check=('fail', None))),
    ('features with no selector', node(), {'nodeprep_nic_offload_networks': []},
     dict(problems=['nodeprep_nic_offload_features={"gro": false, "lro": false}: ' + M.SELECTORS_ALLOWED],
          check=('fail', None))),
    ('a network that is not one', node(), {'nodeprep_nic_offload_networks': '10.20.0.0/33'},
     dict(problems=['nodeprep_nic_offload_networks=["10.20.0.0/33"]: nodeprep_nic_offload_networks[0] '
                    '\'10.20.0.0/33\' is not a valid network (CIDR such as 10.20.0.0/16): \'10.20.0.0/33\' does not '
                    'appear to be an IPv4 or IPv6 network'], check=('fail', None))),
    ('an interface name Linux refuses', node(), {'nodeprep_nic_offload_interfaces': ['eth0', 'ens1f0 np0']},
     dict(problems=['nodeprep_nic_offload_interfaces=["eth0", "ens1f0 np0"]: interface names of 1 to 15 characters '
                    'without "/", ":" or white space; not one: "ens1f0 np0"'], check=('fail', None))),
    ('a driver name with a space', node(), {'nodeprep_nic_offload_drivers': ['mlx5 core']},
     dict(problems=['nodeprep_nic_offload_drivers=["mlx5 core"]: kernel driver names as ethtool -i prints them '
                    '(mlx5_core); not one: "mlx5 core"'], check=('fail', None))),
    # Ansible's validator lists the valid booleans from a set, in no fixed order.
    ('require_match that is not a boolean', node(), {'nodeprep_nic_offload_require_match': 'maybe'},
     dict(problems=[re.compile(re.escape('nodeprep_nic_offload_require_match="maybe": argument '
                                         "'nodeprep_nic_offload_require_match' is of type str and we were unable to "
                                         "convert to bool: The value 'maybe' is not a valid boolean. Valid booleans "
                                         "include: ") + r"(('[a-z0-9]+'|[01]), ){13}('[a-z0-9]+'|[01])" +
                               re.escape(' (role nic_offload: docs/roles/nic_offload.md)'))],
          check=('fail', None))),
    ('GRO back on: a reason, the module for eth0 only',
     node({'eth0': nic(gro=True), 'eth1': nic('10.20.0.12/16')}, persisted('eth0', 'eth1')), {},
     dict(reasons=['eth0: generic-receive-offload is on'], drift=[('eth0: generic-receive-offload is on', 'fail', True)],
          args={'interface': ['eth0'], 'features': {'gro': False, 'lro': False}, 'ignore_fixed': False},
          check=('fail', 'eth0: generic-receive-offload is on'))),
    ('a fresh node: live and the boot unit to do', node({'eth0': nic(gro=True)}, ABSENT), {},
     dict(reasons=['eth0: generic-receive-offload is on'] + UNIT_MISSING,
          drift=[(m, 'fail', True) for m in ['eth0: generic-receive-offload is on'] + UNIT_MISSING],
          args={'interface': ['eth0'], 'features': {'gro': False, 'lro': False}, 'ignore_fixed': False},
          check=('fail', '; '.join(['eth0: generic-receive-offload is on'] + UNIT_MISSING)))),
    ('an edited environment file', node(files=dict(persisted('eth0'), **{
        ENV_DIR + '/eth0.env': file_state('file', MANAGED + 'NODEPREP_ETHTOOL_FEATURES=gro on\n')})), {},
     dict(reasons=[ENV_DIR + '/eth0.env: content differs'],
          drift=[(ENV_DIR + '/eth0.env: content differs', 'fail', True)],
          check=('fail', ENV_DIR + '/eth0.env: content differs'))),
    ('persist false: no file', node(files={}), {'nodeprep_nic_offload_persist': 'false'},
     dict(check=('pass', 'as wanted on eth0'))),
    # The defect of issue 22: ignore_fixed=false given as text skipped the fixed feature.
    ('a fixed feature asked to change, ignore_fixed "false": refused', node({'eth0': nic(lro=True, lro_fixed=True)}),
     {'nodeprep_nic_offload_ignore_fixed': 'false'},
     dict(errors=[FIXED], drift=[(FIXED, 'fail', False)], check=('fail', FIXED))),
    ('a fixed feature asked to change, ignore_fixed: skipped with a warning, not persisted',
     node({'eth0': nic(lro=True, lro_fixed=True)}, dict(persisted('eth0'), **{
         ENV_DIR + '/eth0.env': file_state('file', MANAGED + 'NODEPREP_ETHTOOL_FEATURES=gro off\n')})),
     {'nodeprep_nic_offload_ignore_fixed': 'true'},
     dict(drift=[('eth0: large-receive-offload is on [fixed]: the driver does not allow a change', 'warn', False)],
          check=('warn', 'eth0: large-receive-offload is on [fixed]: the driver does not allow a change'),
          env={'eth0': MANAGED + 'NODEPREP_ETHTOOL_FEATURES=gro off\n'})),
    ('a name the device does not have', node(), {'nodeprep_nic_offload_features': {'rdma-offload': False}},
     dict(errors=["interface eth0: unknown feature 'rdma-offload'; " + KNOWN],
          drift=[("interface eth0: unknown feature 'rdma-offload'; " + KNOWN, 'fail', False)],
          check=('fail', "interface eth0: unknown feature 'rdma-offload'; " + KNOWN))),
    ('an interface named that is not there', node(), {'nodeprep_nic_offload_interfaces': 'eth0,eth9',
                                                      'nodeprep_nic_offload_networks': []},
     dict(drift=[('eth9: no such interface', 'fail', False)], check=('fail', 'eth9: no such interface'))),
    # NetworkManager persists the features in the NIC's connection, which the gather reads (nm_connection): the plan
    # compares it, and readiness sees what the role would change there (issue 27: the role ran a read of it on every
    # run that no check reflected).
    ('NetworkManager persists it, its connection as wanted', node({'eth0': nic(nm=True, conn=connection())}, ABSENT),
     {}, dict(check=('pass', 'as wanted on eth0'))),
    ('NetworkManager persists it, its connection has GRO on',
     node({'eth0': nic(nm=True, conn=connection(gro='on'))}, ABSENT), {},
     dict(reasons=[NM_GRO_ON], drift=[(NM_GRO_ON, 'fail', True)],
          nm=[{'interface': 'eth0', 'connection': 'System eth0',
               'properties': {'ethtool.feature-gro': 'off', 'ethtool.feature-lro': 'off'}}],
          check=('fail', NM_GRO_ON))),
    ('NetworkManager persists it, nothing set in its connection yet',
     node({'eth0': nic(nm=True, conn=connection(gro='', lro=''))}, ABSENT), {},
     dict(reasons=NM_UNSET, drift=[(m, 'fail', True) for m in NM_UNSET],
          nm=[{'interface': 'eth0', 'connection': 'System eth0',
               'properties': {'ethtool.feature-gro': 'off', 'ethtool.feature-lro': 'off'}}],
          check=('fail', '; '.join(NM_UNSET)))),
    ('NetworkManager manages it without a connection: the boot unit persists it',
     node({'eth0': nic(nm=True, conn=connection(None))}, ABSENT), {},
     dict(reasons=UNIT_MISSING, drift=[(m, 'fail', True) for m in UNIT_MISSING], check=('fail', '; '.join(UNIT_MISSING)))),
    ('NetworkManager manages it, its connection cannot be read',
     node({'eth0': nic(nm=True, conn=connection(error=NM_DOWN))}, ABSENT), {},
     dict(errors=['interface eth0: its NetworkManager connection could not be read: ' + NM_DOWN],
          drift=[('interface eth0: its NetworkManager connection could not be read: ' + NM_DOWN, 'fail', False)],
          check=('fail', 'interface eth0: its NetworkManager connection could not be read: ' + NM_DOWN))),
    ('NetworkManager has no property for netns-local: the boot unit persists it',
     node({MLX_IF: dict(nic(nm=True, conn=connection('System ' + MLX_IF)), features=copy.deepcopy(MLX))}, ABSENT),
     {'nodeprep_nic_offload_features': {'gro': False, 'netns-local': False}},
     dict(reasons=MLX_TODO, drift=[(m, 'fail', True) for m in MLX_TODO],
          args={'interface': [MLX_IF], 'features': {'gro': False, 'netns-local': False}, 'ignore_fixed': False},
          env={MLX_IF: MANAGED + 'NODEPREP_ETHTOOL_FEATURES=gro off netns-local off\n'},
          check=('fail', '; '.join(MLX_TODO)))),
    ('a dash in the name is escaped as systemd-escape does', node({'ib-0': nic()}, persisted('ib-0')),
     {'nodeprep_nic_offload_drivers': 'mlx5_core'}, dict(check=('pass', 'as wanted on ib-0'))),
    ('the NIC facts could not be read', dict(node(), nodeprep_errors={'nic': 'nic facts: ethtool -k eth0 failed'}), {},
     dict(errors=['the NIC facts could not be read: nic facts: ethtool -k eth0 failed'],
          drift=[('could not be read: nic facts: ethtool -k eth0 failed', 'fail', False)],
          check=('fail', 'could not be read: nic facts: ethtool -k eth0 failed'))),
]


def expected_of(case):
    name, facts, given, want = case
    return dict(problems=want.get('problems', []), errors=want.get('errors', []), reasons=want.get('reasons', []),
                reports=want.get('reports', []), drift=want.get('drift', []) + want.get('drift_extra', []),
                args=want.get('args'), nm=want.get('nm', []))


@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_plan_table(case):
    name, facts, given, want = case
    plan = make_plan(facts, given)
    expected = expected_of(case)
    assert len(plan['problems']) == len(expected['problems'])
    for got, wanted in zip(plan['problems'], expected['problems']):
        assert wanted.fullmatch(got) if hasattr(wanted, 'fullmatch') else got == wanted
    assert plan['errors'] == expected['errors']
    assert plan['missing'] == []
    assert plan['reasons'] == expected['reasons']
    assert plan['reports'] == expected['reports']
    if plan['problems']:
        return
    assert drift(plan) == expected['drift']
    assert plan['args']['nic_offload'] == expected['args']
    assert [dict((k, v) for k, v in e.items() if k != 'fallback') for e in plan['args']['networkmanager']] == \
        expected['nm']
    assert plan['run'] == expected['reports'] + expected['errors'] + expected['reasons']
    for ifname, text in want.get('env', {}).items():
        assert [e['content'] for e in plan['files'] if e['path'] == '{0}/{1}.env'.format(ENV_DIR, ifname)] == [text]


@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_readiness_is_the_plans_drift(case):
    """The check nic.offload from the plan: its status and words, and reasons == [] <=> the check passes, except
    where the plan says why not: drift no run fixes (unfixable)."""
    name, facts, given, want = case
    plan = make_plan(facts, given)
    result = _readiness.plan_check('nic.offload', plan)
    status, observed = want['check']
    assert result['status'] == status
    if observed is not None:
        assert result['observed'] == observed
    else:
        assert result['observed'] == 'the settings of role nic_offload are invalid: ' + '; '.join(plan['problems'])
    # Every reason is drift a run fixes (the NetworkManager connections too: the gather reads them).
    assert plan['reasons'] == [d['msg'] for d in _plan.fixable_drift(plan)]
    unfixable = [d for d in plan['drift'] if not d['fixable']]
    if not unfixable and not plan['problems']:
        assert (plan['reasons'] == []) == (result['status'] in ('pass', 'skip'))


def apply(facts, plan):
    """The node after the role's work: the module's changes (its own rule), the files written as planned."""
    after = copy.deepcopy(facts)
    args = plan['args'].get('nic_offload')
    for ifname in (args or {}).get('interface', []):
        features = after['nics'][ifname]['features']
        decided = plan_feature_changes(features_as_parsed(features), args['features'], args['ignore_fixed'])
        for leaf, value in decided['wanted'].items():
            features[leaf]['enabled'] = value
    for entry in plan['files']:
        after['nodeprep_files'][entry['path']] = file_state(
            entry['state'], entry['content'], mode=entry['mode'] if entry['state'] != 'link' else '0777',
            target=entry['src'])
    for entry in plan['args'].get('networkmanager') or []:
        # nmcli connection modify <connection> <property> <value>...
        after['nics'][entry['interface']]['nm_connection']['properties'].update(entry['properties'])
    return after


@pytest.mark.parametrize('case', [c for c in CASES if not expected_of(c)['problems'] and not expected_of(c)['errors']],
                         ids=lambda c: c[0])
def test_applying_the_plan_leaves_nothing_to_do(case):
    name, facts, given, want = case
    plan = make_plan(facts, given)
    again = make_plan(apply(facts, plan), given)
    assert _plan.fixable_drift(again) == []
    assert again['reasons'] == [] and again['args']['networkmanager'] == []
    assert [d for d in again['drift'] if not d['fixable']] == [d for d in plan['drift'] if not d['fixable']]
    assert again['args']['nic_offload'] is None
    assert [e for e in again['files'] if e['change']] == []


def test_the_files_in_full():
    plan = make_plan(node({'eth0': nic(), 'ib-0': nic('10.20.0.12/16')}, ABSENT), {})
    folder, link = wants('eth0')
    ib_folder, ib_link = wants('ib-0')
    assert ib_link == ('/etc/systemd/system/sys-subsystem-net-devices-ib\\x2d0.device.wants/'
                       'nodeprep-nic-offload@ib\\x2d0.service')
    assert [dict((k, e[k]) for k in ('path', 'state', 'content', 'mode', 'src', 'owner', 'group', 'change'))
            for e in plan['files']] == [
        {'path': UNIT, 'state': 'file', 'content': UNIT_TEXT, 'mode': '0644', 'src': None, 'owner': 'root',
         'group': 'root', 'change': UNIT + ': missing'},
        {'path': ENV_DIR, 'state': 'directory', 'content': None, 'mode': '0755', 'src': None, 'owner': 'root',
         'group': 'root', 'change': ENV_DIR + ': missing'},
        {'path': ENV_DIR + '/eth0.env', 'state': 'file', 'content': GRO_LRO_OFF, 'mode': '0644', 'src': None,
         'owner': 'root', 'group': 'root', 'change': ENV_DIR + '/eth0.env: missing'},
        {'path': folder, 'state': 'directory', 'content': None, 'mode': '0755', 'src': None, 'owner': 'root',
         'group': 'root', 'change': folder + ': missing'},
        {'path': link, 'state': 'link', 'content': None, 'mode': None, 'src': UNIT, 'owner': 'root', 'group': 'root',
         'change': link + ': missing'},
        {'path': ENV_DIR + '/ib-0.env', 'state': 'file', 'content': GRO_LRO_OFF, 'mode': '0644', 'src': None,
         'owner': 'root', 'group': 'root', 'change': ENV_DIR + '/ib-0.env: missing'},
        {'path': ib_folder, 'state': 'directory', 'content': None, 'mode': '0755', 'src': None, 'owner': 'root',
         'group': 'root', 'change': ib_folder + ': missing'},
        {'path': ib_link, 'state': 'link', 'content': None, 'mode': None, 'src': UNIT, 'owner': 'root',
         'group': 'root', 'change': ib_link + ': missing'},
    ]
    assert plan['units'] == [
        {'name': 'nodeprep-nic-offload@eth0.service', 'wanted_by': 'sys-subsystem-net-devices-eth0.device'},
        {'name': 'nodeprep-nic-offload@ib\\x2d0.service', 'wanted_by': 'sys-subsystem-net-devices-ib\\x2d0.device'}]


def test_networkmanager_without_a_connection_gets_the_boot_units_files():
    plan = make_plan(node({'eth0': nic(nm=True, conn=connection(None))}, persisted('eth0')), {})
    assert [(e['path'], e['change']) for e in plan['files']] == [(UNIT, None), (ENV_DIR, None),
                                                                 (ENV_DIR + '/eth0.env', None)] + [
        (path, None) for path in wants('eth0')]
    assert plan['args']['networkmanager'] == [] and plan['reasons'] == []


def test_the_connections_are_read_in_the_gather():
    """A NIC NetworkManager manages must come with its connection's properties (nm_connection): else the facts are
    missing and nic.offload fails until the gather reads them."""
    plan = make_plan(node({'eth0': nic(nm=True)}, ABSENT), {})
    assert plan['missing'] == ['subsets: nic', 'nic_nm_properties: ethtool.feature-gro, ethtool.feature-lro']
    assert _readiness.plan_check('nic.offload', plan)['status'] == 'fail'


@pytest.mark.parametrize('name, escaped', [
    ('eth0', 'eth0'), ('ib-0', 'ib\\x2d0'), ('br.100', 'br.100'), ('.x', '\\x2ex'), ('a@b', 'a\\x40b'),
    ('veth_1:2', 'veth_1:2'), ('ä', '\\xc3\\xa4'),
])
def test_systemd_escape(name, escaped):
    assert M.systemd_escape(name) == escaped


@pytest.mark.parametrize('given, request_', [
    ({'nodeprep_nic_offload_features': {}}, {}),
    ({}, {'subsets': ['nic'], 'nic_networks': [NET], 'files': [UNIT, ENV_DIR] + list(M.FILE_PATTERNS),
          'nic_nm_properties': ['ethtool.feature-gro', 'ethtool.feature-lro']}),
    ({'nodeprep_nic_offload_drivers': ['mlx5_core']},
     {'subsets': ['nic'], 'files': [UNIT, ENV_DIR] + list(M.FILE_PATTERNS),
      'nic_nm_properties': ['ethtool.feature-gro', 'ethtool.feature-lro']}),
    ({'nodeprep_nic_offload_persist': False}, {'subsets': ['nic'], 'nic_networks': [NET]}),
    # A network that is not one does not reach the gather (which would fail on it, for every role planned with it):
    # every NIC is read and the plan refuses the value, naming the variable.
    ({'nodeprep_nic_offload_networks': ['fabric'], 'nodeprep_nic_offload_persist': False}, {'subsets': ['nic']}),
])
def test_gather_reads_what_the_plan_needs(given, request_):
    settings, problems = _plans.typed_settings('nic_offload', dict(BASE, **given))
    assert problems == []
    assert M.gather(settings) == dict(_plan.new_gather(), **request_)


def test_not_gathered_is_missing_and_fails_the_check():
    plan = make_plan({}, {})
    assert plan['missing'] == ['subsets: nic', 'files: ' + ', '.join([UNIT, ENV_DIR] + list(M.FILE_PATTERNS))]
    assert plan['reasons'] == []
    assert _readiness.plan_check('nic.offload', plan)['status'] == 'fail'


def test_a_glob_not_recorded_leaves_the_per_interface_paths_not_gathered():
    facts = node()
    facts['nodeprep_file_patterns'] = []
    facts['nodeprep_files'] = dict((p, s) for p, s in facts['nodeprep_files'].items() if p in (UNIT, ENV_DIR))
    plan = M.plan(facts, _plans.typed_settings('nic_offload', BASE)[0], _plan.new_context(host=HOST))
    assert changes(plan) == ['{0}: not gathered'.format(p) for p in (ENV_DIR + '/eth0.env',) + wants('eth0')]


def test_features_that_are_not_a_dict_are_a_problem_even_untyped():
    settings = dict(_plan.defaults(M), nodeprep_nic_offload_features=['gro'], nodeprep_nic_offload_networks=[NET])
    plan = M.plan(node(), settings, _plan.new_context(host=HOST))
    assert plan['problems'] == ['nodeprep_nic_offload_features=["gro"]: ' + M.FEATURES_ALLOWED]
    assert plan['reasons'] == [] and plan['files'] == []


@pytest.mark.parametrize('names, props', [
    (['gro', 'lro'], ['ethtool.feature-gro', 'ethtool.feature-lro']),
    (['generic-receive-offload', 'rx-gro', 'gro'], ['ethtool.feature-gro']),
    (['rx-gro-hw', 'tso', 'netns-local'], ['ethtool.feature-rx-gro-hw', 'ethtool.feature-tso']),
])
def test_the_connection_properties_the_gather_reads(names, props):
    """What a NIC NetworkManager manages holds for the features the user names (libnm's property names: a legacy
    flag by its short name, anything else by its own; netns-local has none, the boot unit persists it)."""
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nic_offload import nm_property_names
    assert nm_property_names(names) == props


# ---------------------------------------------------------------------------------------------------------------------
# Agreement with readiness (tests/unit/plugins/module_utils/plans/agreement.py): for every row of CASES (the
# NetworkManager connections among them, now read in the gather) and a managed NIC whose connection the gather did not
# read, whether the role has work there, whether it refuses the node, and nic.offload's status.

AGREEMENT_OF = {
    'no features: nothing to do, nothing gathered': (False, False, 'skip'),
    'converged: the features and the boot unit as wanted': (False, False, 'pass'),
    'no NIC on the network: reported, nothing to do': (False, False, 'skip'),
    'no NIC on the network with require_match: refused': (False, True, 'fail'),
    'a feature value that is not a boolean': (False, True, 'fail'),
    'a feature value 0.5': (False, True, 'fail'),
    'feature values written as text are read as Ansible reads them': (False, False, 'pass'),
    'a feature name that cannot be one': (False, True, 'fail'),
    'features given as a list': (False, True, 'fail'),
    'features with no selector': (False, True, 'fail'),
    'a network that is not one': (False, True, 'fail'),
    'an interface name Linux refuses': (False, True, 'fail'),
    'a driver name with a space': (False, True, 'fail'),
    'require_match that is not a boolean': (False, True, 'fail'),
    'GRO back on: a reason, the module for eth0 only': (True, False, 'fail'),
    'a fresh node: live and the boot unit to do': (True, False, 'fail'),
    'an edited environment file': (True, False, 'fail'),
    'persist false: no file': (False, False, 'pass'),
    'a fixed feature asked to change, ignore_fixed "false": refused': (False, True, 'fail'),
    'a fixed feature asked to change, ignore_fixed: skipped with a warning, not persisted': (False, False, 'warn'),
    'a name the device does not have': (False, True, 'fail'),
    'an interface named that is not there': (False, False, 'fail'),
    'NetworkManager persists it, its connection as wanted': (False, False, 'pass'),
    'NetworkManager persists it, its connection has GRO on': (True, False, 'fail'),
    'NetworkManager persists it, nothing set in its connection yet': (True, False, 'fail'),
    'NetworkManager manages it without a connection: the boot unit persists it': (True, False, 'fail'),
    'NetworkManager manages it, its connection cannot be read': (False, True, 'fail'),
    'NetworkManager has no property for netns-local: the boot unit persists it': (True, False, 'fail'),
    'a dash in the name is escaped as systemd-escape does': (False, False, 'pass'),
    'the NIC facts could not be read': (False, True, 'fail'),
}
AGREEMENT = [(name, facts, given, AGREEMENT_OF[name]) for name, facts, given, _want in CASES] + [
    ('a NIC NetworkManager manages, its connection not gathered', node({'eth0': nic(nm=True)}, ABSENT), {},
     (False, False, 'fail')),
]


@pytest.mark.parametrize('name, facts, given, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_agreement_table(name, facts, given, want):
    work, refuses, status = want
    agreement.assert_agrees(name, make_plan(facts, given), M.CHECKS, work, refuses, {'nic.offload': status})
