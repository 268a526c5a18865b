# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""R6: ELRepo's EL10 repository is signed with the v2 key only; listing the original key there aborts dnf."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.filter.elrepo_gpgkeys import elrepo_gpgkeys

V1 = 'https://www.elrepo.org/RPM-GPG-KEY-elrepo.org'
V2 = 'https://www.elrepo.org/RPM-GPG-KEY-v2-elrepo.org'


@pytest.mark.parametrize('major, keys', [('8', [V1, V2]), (9, [V1, V2]), ('10', [V2])])
def test_keys_per_release(major, keys):
    assert elrepo_gpgkeys(major) == keys


def test_mirror_base():
    assert elrepo_gpgkeys('10', base='file:///srv/testbed-repos/el10/elrepo/') == [
        'file:///srv/testbed-repos/el10/elrepo/RPM-GPG-KEY-v2-elrepo.org']


def test_unknown_release():
    with pytest.raises(AnsibleFilterError) as err:
        elrepo_gpgkeys('7')
    assert str(err.value) == "elrepo_gpgkeys: EL major version '7' is not one ELRepo publishes for; allowed: 8, 9, 10"


def test_given_keys_lose_the_v1_key_on_el10():
    base = 'file:///srv/testbed-repos/el10/elrepo/'
    given = [base + 'RPM-GPG-KEY-elrepo.org', base + 'RPM-GPG-KEY-v2-elrepo.org', 'https://example.org/my-key']
    assert elrepo_gpgkeys('10', keys=given) == [base + 'RPM-GPG-KEY-v2-elrepo.org', 'https://example.org/my-key']
    assert elrepo_gpgkeys('9', keys=given) == given
    assert elrepo_gpgkeys('8', keys=V1) == [V1]
