# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one package-database reader (_packages) on real rpm and dpkg-query output (tests/fixtures/packages, see
tests/fixtures/SOURCES.md: rpm 4.18 and dpkg-query 1.21.22 of Debian 12, with the collection's query formats)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FakeModule, read_fixture

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _driver_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _node_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _packages as pk
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _package_db


def capture(name):
    """(rc, stdout, stderr) of a captured command."""
    def text(suffix):
        try:
            return read_fixture('packages', name + suffix)
        except IOError:
            return ''
    return int(text('.rc')), text('.stdout'), text('.stderr')


def rec(epoch, version, release, arch):
    return {'epoch': epoch, 'version': version, 'release': release, 'arch': arch}


KERNELS = [rec(0, '5.14.0', '427.13.1.el9_4', 'x86_64'), rec(0, '5.14.0', '503.el9', 'x86_64')]


def test_argv_one_builder():
    assert _package_db.package_argv('rpm', '/usr/bin/rpm') == [
        '/usr/bin/rpm', '-qa', '--qf', '%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\n']
    assert _package_db.package_argv('rpm', '/usr/bin/rpm', ['a', 'b']) == [
        '/usr/bin/rpm', '-q', '--qf', '%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\n', 'a', 'b']
    assert _package_db.package_argv('dpkg', '/usr/bin/dpkg-query', ['a']) == [
        '/usr/bin/dpkg-query', '-W', '-f', '${Package}\t${Version}\t${db:Status-Abbrev}\t${Architecture}\n', 'a']
    with pytest.raises(ValueError):
        _package_db.package_argv('apk', '/sbin/apk')


def test_parse_rpm_qa():
    assert _package_db.parse_rpm(capture('rpm-qa')[1]) == {
        'kernel': KERNELS, 'nvidia-open': [rec(3, '580.95.05', '1.el9', 'noarch')]}


def test_parse_rpm_q_names():
    # "package dkms is not installed" is not a package line.
    assert _package_db.parse_rpm(capture('rpm-q')[1]) == {
        'nvidia-open': [rec(3, '580.95.05', '1.el9', 'noarch')], 'kernel': KERNELS}


def test_parse_dpkg_all():
    packages, holds = _package_db.parse_dpkg(capture('dpkg-W')[1])
    assert packages == {
        'cuda-keyring': [rec(0, '1.1', '', 'all')],
        'libnvidia-compute-580': [rec(1, '580.95.05', '0ubuntu1', 'amd64')],
        'nvidia-fabricmanager': [rec(0, '580.95.05', '1', 'amd64')],
        'nvidia-open': [rec(0, '580.95.05', '0ubuntu1', 'amd64')]}
    assert holds == ['nvidia-fabricmanager']


def test_parse_dpkg_debian12_system():
    packages, holds = _package_db.parse_dpkg(capture('dpkg-W-debian12')[1])
    assert _package_db.installed_versions(packages, ['bash', 'bsdutils', 'libc6', 'nosuchpkg']) == {
        'bash': '5.2.15-2+b8', 'bsdutils': '1:2.38.1-5+deb12u3', 'libc6': '2.36-9+deb12u14', 'nosuchpkg': None}
    assert holds == []


def test_parse_dpkg_arch_qualified_name():
    packages, dummy = _package_db.parse_dpkg('libnvidia-compute-580:amd64\t1:580.95.05-0ubuntu1\tii \tamd64\n')
    assert packages == {'libnvidia-compute-580': [rec(1, '580.95.05', '0ubuntu1', 'amd64')]}


@pytest.mark.parametrize('record, text', [
    (rec(0, '580.95.05', '1.el9', 'x86_64'), '580.95.05-1.el9'),
    (rec(3, '580.95.05', '1.el9', 'noarch'), '3:580.95.05-1.el9'),
    (rec(0, '1.1', '', 'all'), '1.1'),
    (rec(1, '2.38.1', '5+deb12u3', 'amd64'), '1:2.38.1-5+deb12u3'),
])
def test_version_text(record, text):
    assert _package_db.version_text(record) == text


EL = {'rpm': '/usr/bin/rpm', 'dpkg-query': None}
DEB = {'rpm': '/usr/bin/rpm', 'dpkg-query': '/usr/bin/dpkg-query'}


def no_dpkg_db(monkeypatch):
    monkeypatch.setattr(pk.os.path, 'exists', lambda path: False)


def dpkg_db(monkeypatch):
    monkeypatch.setattr(pk.os.path, 'exists', lambda path: path == '/var/lib/dpkg/status')


def test_read_all_rpm():
    module = FakeModule(EL, [capture('rpm-qa')])
    kind, packages, holds = pk.read_packages(module, family='el')
    assert (kind, sorted(packages), holds) == ('rpm', ['kernel', 'nvidia-open'], [])
    assert module.seen == [_package_db.package_argv('rpm', '/usr/bin/rpm')]


def test_read_names_rpm_missing_is_not_an_error(monkeypatch):
    no_dpkg_db(monkeypatch)
    module = FakeModule(EL, [capture('rpm-q')])
    kind, packages, dummy = pk.read_packages(module, ['nvidia-open', 'kernel', 'dkms'])
    assert _package_db.installed_versions(packages, ['nvidia-open', 'kernel', 'dkms']) == {
        'nvidia-open': '3:580.95.05-1.el9', 'kernel': '5.14.0-503.el9', 'dkms': None}


def test_read_rpm_failure(monkeypatch):
    no_dpkg_db(monkeypatch)
    module = FakeModule(EL, [(1, '', 'error: cannot open Packages database\n')])
    with pytest.raises(pk.PackagesError) as err:
        pk.read_packages(module, ['nvidia-open', 'dkms'])
    assert str(err.value) == 'rpm -q failed (rc=1): error: cannot open Packages database'


def test_read_all_rpm_any_rc_is_a_failure():
    module = FakeModule(EL, [(1, '', 'error: rpmdb open failed\n')])
    with pytest.raises(pk.PackagesError) as err:
        pk.read_packages(module, family='el')
    assert str(err.value) == 'rpm -qa failed (rc=1): error: rpmdb open failed'


def test_read_names_dpkg(monkeypatch):
    dpkg_db(monkeypatch)
    module = FakeModule(DEB, [capture('dpkg-W-names')])
    kind, packages, holds = pk.read_packages(module, ['nvidia-open', 'nvidia-dkms-580-open', 'nosuchpkg'])
    assert kind == 'dpkg'
    # rc 1 for the unknown name; the removed package ('rc') is not installed.
    assert _package_db.installed_versions(packages, ['nvidia-open', 'nvidia-dkms-580-open', 'nosuchpkg']) == {
        'nvidia-open': '580.95.05-0ubuntu1', 'nvidia-dkms-580-open': None, 'nosuchpkg': None}


def test_read_dpkg_failure(monkeypatch):
    module = FakeModule(DEB, [(2, '', 'dpkg-query: error: parsing file /var/lib/dpkg/status\n')])
    with pytest.raises(pk.PackagesError) as err:
        pk.read_packages(module, family='debian')
    assert str(err.value) == 'dpkg-query -W failed (rc=2): dpkg-query: error: parsing file /var/lib/dpkg/status'


def test_missing_tools(monkeypatch):
    no_dpkg_db(monkeypatch)
    with pytest.raises(pk.PackagesError) as err:
        pk.read_packages(FakeModule({}, []), ['bash'])
    assert str(err.value) == 'neither dpkg-query nor rpm found in PATH'
    with pytest.raises(pk.PackagesError) as err:
        pk.read_packages(FakeModule({}, []), family='debian')
    assert str(err.value) == 'dpkg-query is not installed, so the installed packages cannot be listed'


# -- the two callers read the same records -----------------------------------------------------------------------------

def test_both_callers_read_one_rpm_database(monkeypatch):
    no_dpkg_db(monkeypatch)
    driver = _driver_node.read_driver_node(FakeModule(EL, [capture('rpm-qa')]), 'el')
    # keep_package keeps the NVIDIA stack only: the kernels are left out of the driver's view.
    assert driver['packages'] == {'nvidia-open': [rec(3, '580.95.05', '1.el9', 'noarch')]}
    state, error = _node_state.collect_packages(FakeModule(EL, [capture('rpm-q')]), ['nvidia-open', 'kernel', 'dkms'])
    assert (state, error) == ({'nvidia-open': '3:580.95.05-1.el9', 'kernel': '5.14.0-503.el9', 'dkms': None}, None)


def test_both_callers_read_one_dpkg_database(monkeypatch):
    dpkg_db(monkeypatch)
    driver = _driver_node.read_driver_node(FakeModule(DEB, [capture('dpkg-W')]), 'debian')
    assert driver['packages'] == {
        'libnvidia-compute-580': [rec(1, '580.95.05', '0ubuntu1', 'amd64')],
        'nvidia-fabricmanager': [rec(0, '580.95.05', '1', 'amd64')],
        'nvidia-open': [rec(0, '580.95.05', '0ubuntu1', 'amd64')]}
    assert driver['apt_holds'] == ['nvidia-fabricmanager']
    state, error = _node_state.collect_packages(FakeModule(DEB, [capture('dpkg-W-names')]),
                                                ['nvidia-open', 'nvidia-dkms-580-open', 'nosuchpkg'])
    assert (state, error) == ({'nvidia-open': '580.95.05-0ubuntu1', 'nvidia-dkms-580-open': None,
                               'nosuchpkg': None}, None)


def test_driver_node_reports_a_database_that_cannot_be_read():
    with pytest.raises(_driver_node.DriverNodeError) as err:
        _driver_node.read_driver_node(FakeModule({'dpkg-query': '/usr/bin/dpkg-query'}, [(2, '', 'broken\n')]),
                                      'debian')
    assert str(err.value) == 'dpkg-query -W failed (rc=2): broken'


def test_collect_packages_reports_the_error(monkeypatch):
    no_dpkg_db(monkeypatch)
    module = FakeModule(EL, [(1, '', 'error: cannot open Packages database\n')])
    assert _node_state.collect_packages(module, ['nvidia-persistenced', 'dkms']) == (
        {'nvidia-persistenced': None, 'dkms': None}, 'rpm -q failed (rc=1): error: cannot open Packages database')
    assert _node_state.collect_packages(FakeModule({}, []), ['bash']) == (
        {'bash': None}, 'neither dpkg-query nor rpm found in PATH')
